"""Uploaded edge lists (CSV or Parquet) → the population's graph, ids and node attributes.

Ids are integers or text (both columns compared as text if their types differ). Agents are
numbered as the spec's `order` says (worker_server.graphs.spec.EdgeListGraph). Bad input raises
EdgeListError naming the spec field and the column, with counts and the first offending lines
(CSV: file line numbers, the header being line 1; Parquet: 1-based row numbers). Mapping runs
in Arrow's hash tables and numpy sorts, never a Python loop per edge.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from worker_server.graphs.csr import Graph, canonical_keys, drop_repeats, from_keys
from worker_server.graphs.locality import locality_order, relabel
from worker_server.graphs.spec import MAX_GRAPH_EDGES, EdgeListGraph

MAX_NODES = 10_000_000  # the population size cap (backend.settings.max_population_size's bound)
SHOWN = 5  # offending lines quoted in a message
PARQUET_MAGIC = b"PAR1"


class EdgeListError(ValueError):
    """`loc` is relative to the graph section, e.g. ("upload",) or ("nodes", "upload")."""

    def __init__(self, loc: tuple[str, ...], message: str):
        super().__init__(message)
        self.loc = loc
        self.message = message


@dataclass(frozen=True)
class ParsedEdgeList:
    graph: Graph
    ids: pa.Array  # agent index → the id in the file
    attributes: pa.Table | None  # node attributes in agent order, without the id column
    rows: int  # edge rows read


@dataclass(frozen=True)
class _Source:
    loc: tuple[str, ...]
    fmt: str

    def lines(self, rows: np.ndarray) -> str:
        """How a person finds these rows in the file (0-based data rows in)."""
        shown = ", ".join(str(int(r) + (2 if self.fmt == "csv" else 1)) for r in rows[:SHOWN])
        more = f" (first {SHOWN} shown)" if rows.size > SHOWN else ""
        return (
            f"{'line' if self.fmt == 'csv' else 'row'}{'s' if rows.size > 1 else ''} {shown}{more}"
        )

    def fail(self, message: str) -> EdgeListError:
        return EdgeListError(self.loc, message)


def read_table(data: bytes, fmt: str | None, source: _Source | None = None) -> pa.Table:
    fmt = fmt or ("parquet" if data[:4] == PARQUET_MAGIC else "csv")
    where = source or _Source(("upload",), fmt)
    try:
        if fmt == "parquet":
            reader = pq.ParquetFile(pa.BufferReader(data))
            if reader.metadata.num_rows > MAX_GRAPH_EDGES:
                raise where.fail(
                    f"{reader.metadata.num_rows:,} rows; at most {MAX_GRAPH_EDGES:,} are allowed"
                )
            return reader.read()
        return pacsv.read_csv(pa.BufferReader(data))
    except pa.ArrowException as exc:
        raise where.fail(f"cannot read the file as {fmt}: {exc}") from None


def _column(table: pa.Table, name: str, source: _Source, what: str) -> pa.Array:
    if name not in table.column_names:
        known = ", ".join(repr(c) for c in table.column_names[:20])
        raise source.fail(f"no column {name!r} for the {what}; the file has {known}")
    column = table.column(name).combine_chunks()
    if len(column) == 0:  # a header alone: nothing to infer a type from
        return column.cast(pa.int64())
    if column.null_count:
        rows = np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))
        raise source.fail(f"column {name!r} is empty in {rows.size:,} rows: {source.lines(rows)}")
    if not (pa.types.is_integer(column.type) or pa.types.is_string(column.type)):
        if pa.types.is_large_string(column.type):
            return column.cast(pa.string())
        raise source.fail(f"column {name!r} holds {column.type}; ids must be integers or text")
    return column


def _common_type(*columns: pa.Array) -> list[pa.Array]:
    if all(pa.types.is_integer(c.type) for c in columns):
        return [c.cast(pa.int64()) for c in columns]
    return [c.cast(pa.string()) for c in columns]


def _first_rows(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each position, whether it is the first with its key; and what first position each
    later repeat repeats (by position, so the earliest line is kept)."""
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    starts = np.ones(keys.size, dtype=bool)
    starts[1:] = ordered[1:] != ordered[:-1]
    first_of_group = order[np.maximum.accumulate(np.where(starts, np.arange(keys.size), 0))]
    is_first = np.empty(keys.size, dtype=bool)
    is_first[order] = starts
    repeats = np.empty(keys.size, dtype=np.int64)
    repeats[order] = first_of_group
    return is_first, repeats


def _agent_order(ids: pa.Array, order: str) -> pa.Array:
    """Distinct ids in agent order: first seen, or ascending (locality starts from ascending,
    so the file's row order changes nothing)."""
    distinct = pc.unique(ids)  # hash based, in first-seen order
    if order in ("sorted", "locality"):
        distinct = distinct.take(pc.sort_indices(distinct))
    return distinct


def _node_table(spec: EdgeListGraph, data: bytes, edge_ids: pa.Array) -> tuple[pa.Array, pa.Table]:
    source = _Source(("nodes", "upload"), "parquet" if data[:4] == PARQUET_MAGIC else "csv")
    table = read_table(data, None, source)
    node_ids = _column(table, spec.nodes.id_column, source, "node id")
    if len(node_ids) > MAX_NODES:
        raise source.fail(f"{len(node_ids):,} nodes; at most {MAX_NODES:,} agents are allowed")
    node_ids, _ = _common_type(node_ids, edge_ids)
    is_first, repeats = _first_rows(pc.dictionary_encode(node_ids).indices.to_numpy())
    if not is_first.all():
        rows = np.flatnonzero(~is_first)
        raise source.fail(
            f"{rows.size:,} node ids appear more than once in column "
            f"{spec.nodes.id_column!r}: {source.lines(rows)} (first at "
            f"{source.lines(repeats[rows][:1])})"
        )
    if spec.order in ("sorted", "locality"):
        order = pc.sort_indices(node_ids)
        node_ids, table = node_ids.take(order), table.take(order)
    return node_ids, table.drop_columns([spec.nodes.id_column])


def _agent_index(
    spec: EdgeListGraph, source: _Source, both: pa.Array, src: pa.Array, nodes_data: bytes | None
) -> tuple[pa.Array, pa.Table | None, pa.Array]:
    """The agents' ids (the node table's, or the edge list's distinct ids), their attributes,
    and each id of `both`'s position among them."""
    if spec.nodes is not None:
        if nodes_data is None:
            raise EdgeListError(("nodes", "upload"), "the node table was not uploaded")
        agents, attributes = _node_table(spec, nodes_data, src)
        both = both.cast(agents.type)
        index = pc.index_in(both, value_set=agents)
        if index.null_count:
            unknown = np.flatnonzero(index.is_null().to_numpy(zero_copy_only=False))
            lines = np.unique(unknown // 2)  # few: an error path
            raise source.fail(
                f"{unknown.size:,} ids in the edge list are not in the node table's column "
                f"{spec.nodes.id_column!r}: {source.lines(lines)}"
            )
    else:
        agents, attributes = _agent_order(both, spec.order), None
        if len(agents) > MAX_NODES:
            raise source.fail(f"{len(agents):,} distinct ids; at most {MAX_NODES:,} agents")
        index = pc.index_in(both, value_set=agents)
    return agents, attributes, index


def _sorted_keys(
    spec: EdgeListGraph, source: _Source, u: np.ndarray, v: np.ndarray, n: int
) -> np.ndarray:
    """The edges' canonical keys, sorted, one per pair: self-loops are refused, and duplicate
    pairs refused or merged as the spec says."""
    loops = np.flatnonzero(u == v)
    if loops.size:
        raise source.fail(
            f"{loops.size:,} self-loops ({spec.source!r} equals {spec.target!r}): "
            f"{source.lines(loops)}"
        )
    keys = canonical_keys(u, v, n)
    ordered = np.sort(keys)
    if np.any(ordered[1:] == ordered[:-1]):  # the slower stable pass only to report or merge
        is_first, repeats = _first_rows(keys)
        if spec.duplicates == "reject":
            dupes = np.flatnonzero(~is_first)
            raise source.fail(
                f"{dupes.size:,} duplicate edges (the same pair in either direction): "
                f"{source.lines(dupes)}, repeating {source.lines(repeats[dupes][:SHOWN])}; "
                "set duplicates: merge to keep one edge per pair"
            )
        ordered = drop_repeats(ordered)
    return ordered


def parse_edge_list(
    spec: EdgeListGraph, data: bytes, nodes_data: bytes | None = None
) -> ParsedEdgeList:
    """The graph of an uploaded edge list (and node table, when the spec names one)."""
    table = read_table(data, spec.format)
    source = _Source(
        ("upload",), spec.format or ("parquet" if data[:4] == PARQUET_MAGIC else "csv")
    )
    if table.num_rows > MAX_GRAPH_EDGES:
        raise source.fail(f"{table.num_rows:,} rows; at most {MAX_GRAPH_EDGES:,} are allowed")
    if table.num_rows == 0 and spec.nodes is None:
        raise source.fail("the edge list has no rows")
    src, dst = _common_type(
        _column(table, spec.source, source, "source"), _column(table, spec.target, source, "target")
    )
    rows = len(src)
    # Row by row, source before target: what "first seen" means.
    both = pa.concat_arrays([src, dst]).take(
        pa.array(np.stack([np.arange(rows), np.arange(rows) + rows], axis=1).reshape(-1))
    )
    agents, attributes, index = _agent_index(spec, source, both, src, nodes_data)
    mapped = index.to_numpy(zero_copy_only=False).astype(np.int64)
    u, v = mapped[0::2], mapped[1::2]
    n = len(agents)
    ordered = _sorted_keys(spec, source, u, v, n)
    graph = from_keys(n, ordered)
    if spec.order == "locality":
        graph, agents, attributes = _by_locality(graph, agents, attributes)
    return ParsedEdgeList(graph=graph, ids=agents, attributes=attributes, rows=rows)


def _by_locality(graph: Graph, agents: pa.Array, attributes: pa.Table | None):
    """The graph, its ids and node attributes renumbered breadth first (locality_order)."""
    order = locality_order(graph)
    _, (u, v) = relabel(graph, order)
    graph = from_keys(graph.nodes, np.sort(canonical_keys(u, v, graph.nodes)))
    taken = pa.array(order)
    return graph, agents.take(taken), None if attributes is None else attributes.take(taken)
