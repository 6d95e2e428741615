"""A population's graph on the manager: built at deploy, described in the record, sent to workers.

The deploy builds the graph once (generated from the spec and the population's seed, or parsed
from an uploaded edge list), writes it to the population's graph file (backend.graphs.files)
and stores its statistics in `populations.graph`, with the file's path. Workers get their
agents' rows with the agents (AgentColumns.graph); a re-placed agent's row is read from the
file again. The file is the one source of truth: nothing is regenerated.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from backend.graphs.edge_list import EdgeListError, ParsedEdgeList, parse_edge_list
from backend.graphs.files import graph_path, save_graph
from backend.graphs.rows import take_rows
from backend.graphs.uploads import UnknownUpload, read_upload
from backend.populations.config import PopulationConfig, persona_problems
from worker_server.graphs.csr import Graph
from worker_server.graphs.cut import complete_cut_fraction, cut_fraction
from worker_server.graphs.generators import generate
from worker_server.graphs.spec import EdgeListGraph, expected_edges, stored_bytes
from worker_server.graphs.stats import (
    MAX_COMPONENT_EDGES,
    clustering_estimate,
    component_labels,
    degree_histogram,
    degree_stats,
)
from worker_server.graphs.storage import open_graph

NUMBER_MASK = np.int64(0xFFFFFFFF)
# Categories a node-table column may have before it is refused (a free-text column such as a
# name is one category per agent: it belongs in the persona, not in an attribute).
MAX_NODE_CATEGORIES = 100_000


class GraphInvalid(ValueError):
    """The graph cannot be built for this config: `loc` is relative to the config."""

    def __init__(self, loc: tuple[str | int, ...], message: str, value: Any = None):
        super().__init__(message)
        self.loc = loc
        self.message = message
        self.value = value


@dataclass
class BuiltGraph:
    """What a deploy builds: the graph (None for complete), and node attributes if uploaded."""

    graph: Graph | None
    # name -> (categories, codes) in agent order, from an uploaded node table.
    attributes: dict[str, tuple[list[str], np.ndarray]]
    parsed: ParsedEdgeList | None = None


def parse_uploaded(config: PopulationConfig, data_dir: Path) -> ParsedEdgeList:
    """The config's edge list parsed from its uploads; GraphInvalid naming the field."""
    spec = config.graph
    assert isinstance(spec, EdgeListGraph)
    try:
        data = read_upload(data_dir, spec.upload)
    except UnknownUpload as exc:
        raise GraphInvalid(("graph", "upload"), str(exc), spec.upload) from None
    nodes_data = None
    if spec.nodes is not None:
        try:
            nodes_data = read_upload(data_dir, spec.nodes.upload)
        except UnknownUpload as exc:
            raise GraphInvalid(("graph", "nodes", "upload"), str(exc), spec.nodes.upload) from None
    try:
        parsed = parse_edge_list(spec, data, nodes_data)
    except EdgeListError as exc:
        raise GraphInvalid(("graph", *exc.loc), exc.message) from None
    if parsed.graph.nodes != config.size:
        where = "rows in the node table" if spec.nodes is not None else "distinct ids in the edges"
        raise GraphInvalid(
            ("size",),
            f"the edge list has {parsed.graph.nodes:,} agents ({where}); size is "
            f"{config.size:,}: set size to {parsed.graph.nodes}",
            config.size,
        )
    return parsed


def node_attributes(
    parsed: ParsedEdgeList, taken: set[str]
) -> dict[str, tuple[list[str], np.ndarray]]:
    """The node table's columns as categorical attributes (values as text), agent order."""
    if parsed.attributes is None:
        return {}
    out: dict[str, tuple[list[str], np.ndarray]] = {}
    for name in parsed.attributes.column_names:
        if name in taken:
            raise GraphInvalid(
                ("graph", "nodes", "upload"),
                f"the node table's column {name!r} has the name of a distribution's attribute",
            )
        column = parsed.attributes.column(name).combine_chunks()
        text = pc.fill_null(column.cast(pa.string()), "")
        encoded = pc.dictionary_encode(text)
        categories = encoded.dictionary.to_pylist()
        if len(categories) > MAX_NODE_CATEGORIES:
            raise GraphInvalid(
                ("graph", "nodes", "upload"),
                f"the node table's column {name!r} has {len(categories):,} distinct values; an "
                f"attribute may have at most {MAX_NODE_CATEGORIES:,}",
            )
        out[name] = (categories, encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64))
    return out


def check_persona(
    config: PopulationConfig, attributes: dict[str, tuple[list[str], np.ndarray]]
) -> None:
    """The persona's placeholders against the distributions' attributes and the node table's
    columns (the config alone could not tell): GraphInvalid at the persona's field."""
    value_chars: dict[str, int] = {}
    for dist in config.distributions:
        value_chars.update(dist.value_chars())
    for name, (categories, _) in attributes.items():
        value_chars[name] = max(map(len, categories), default=0)
    for loc, message, value in persona_problems(config.persona, value_chars, "none"):
        raise GraphInvalid(loc, message, value)


def build(config: PopulationConfig, data_dir: Path) -> BuiltGraph:
    """Generate or parse the population's graph (blocking: run it in a thread)."""
    spec = config.graph
    if isinstance(spec, EdgeListGraph):
        parsed = parse_uploaded(config, data_dir)
        taken = {p for d in config.distributions for p in d.placeholders}
        attributes = node_attributes(parsed, taken)
        if config.has_node_table:
            check_persona(config, attributes)
        return BuiltGraph(parsed.graph, attributes, parsed)
    return BuiltGraph(generate(spec, config.size, config.seed), {})


def estimated_bytes(config: PopulationConfig) -> int:
    """The graph's stored bytes as estimated before it exists (0 without one)."""
    if config.graph is None or config.graph.kind == "complete":
        return 0
    return stored_bytes(expected_edges(config.graph, config.size), config.size)


def stats(graph: Graph | None, config: PopulationConfig, bounds: np.ndarray) -> dict[str, Any]:
    """The record's description of the graph (blocking: run it in a thread). `bounds` are the
    placement's contiguous id ranges (part p: agents bounds[p]..bounds[p+1]-1)."""
    spec = config.graph
    size = config.size
    if graph is None:  # complete: nothing stored, every number follows from the size
        return {
            "kind": spec.kind,
            "nodes": size,
            "edges": size * (size - 1) // 2,
            "mean_degree": float(size - 1),
            "min_degree": size - 1,
            "max_degree": size - 1,
            "isolated": int(size == 1),
            "components": 1 if size else 0,
            "largest_component": size,
            "clustering": {"clustering": 1.0, "stderr": 0.0} if size > 2 else None,
            "degree_histogram": None,
            "cut_fraction": complete_cut_fraction(size, bounds),
        }
    out: dict[str, Any] = {"kind": spec.kind, **degree_stats(graph)}
    out["components"], out["largest_component"] = _components(graph)
    out["clustering"] = clustering_estimate(graph, seed=config.seed)
    out["degree_histogram"] = degree_histogram(graph)
    out["cut_fraction"] = cut_fraction(graph, bounds)
    return out


def _components(graph: Graph) -> tuple[int | None, int | None]:
    """How many components, and the largest one's size (None, None past the edge budget)."""
    if graph.edges > MAX_COMPONENT_EDGES:
        return None, None
    if graph.nodes == 0:
        return 0, 0
    labels = component_labels(graph)
    count = int(np.count_nonzero(labels == np.arange(graph.nodes)))
    return count, int(np.bincount(labels).max())


def save(
    data_dir: Path, population_id: int, built: BuiltGraph, config: PopulationConfig, record: dict
) -> Path | None:
    """Write the graph file (None for complete graphs: nothing to store)."""
    if built.graph is None:
        return None
    meta = {
        "population_id": population_id,
        "spec": config.graph.model_dump(mode="json"),
        "seed": str(config.seed),
        "stats": record,
    }
    return save_graph(data_dir, population_id, built.graph, meta)


def file_of(population) -> Path | None:
    """The population's graph file as its record says (None: no graph, or a complete one)."""
    graph = getattr(population, "graph", None) or {}
    file = graph.get("file")
    return Path(file) if file else None


def rows_of(graph_file: Path, ids: np.ndarray) -> Graph:
    """The rows of agents `ids` (ascending) read from the graph file, as one CSR block aligned
    with ids (neighbours as numbers in the population)."""
    stored = open_graph(graph_file, verify=False)
    numbers = np.asarray(ids, dtype=np.int64) & NUMBER_MASK
    if len(numbers) == 0:
        return Graph(0, np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.int32))
    first, last = int(numbers[0]), int(numbers[-1])
    block = stored.rows(first, last + 1)
    if len(numbers) == last - first + 1:
        return block
    return take_rows(block, numbers - first)


__all__ = [
    "BuiltGraph",
    "GraphInvalid",
    "build",
    "estimated_bytes",
    "file_of",
    "graph_path",
    "rows_of",
    "save",
    "stats",
    "take_rows",
]
