"""The `graph:` section of a population config: which graph joins the agents.

Each kind is its own model (unknown keys rejected), told apart by `kind`. A check that needs the
population's size (k < size, a clique size that divides it, the edge budget) is in
`problems_for_size`, which returns (loc, message, input) triples relative to the graph section,
so the population config can raise them under `("graph", ...)` next to its other problems.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator
from pydantic_core import PydanticCustomError

# 10^7 agents (the population cap) at mean degree 20: 800 MB of int32 neighbour lists, and a
# few GB while generating. Past this a graph would not fit the machines the platform targets.
MAX_GRAPH_EDGES = 100_000_000
# Cliques are for many small independent replicas; a clique of this many agents already holds
# 5·10^7 edges.
MAX_CLIQUE_SIZE = 10_000
COLUMN = r"^[^\x00-\x1f]{1,200}$"  # a column name: printable, bounded
UPLOAD = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$"  # an uploaded file's name (no paths)
ERROR_TYPE = "graph_config"

Problem = tuple[tuple[str | int, ...], str, Any]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CompleteGraph(_Strict):
    """Everyone neighbours everyone; no edges are stored (models use aggregates or pairings)."""

    kind: Literal["complete"] = Field(title="Kind", description="every agent neighbours all others")


class ErdosRenyiGraph(_Strict):
    """G(n, p) with p = mean_degree / (size - 1): every pair is an edge independently."""

    kind: Literal["erdos_renyi"] = Field(title="Kind", description="independent random edges")
    mean_degree: float = Field(
        gt=0,
        allow_inf_nan=False,
        title="Mean degree",
        description="expected neighbours per agent; at most size - 1",
    )


class WattsStrogatzGraph(_Strict):
    """A ring where each agent links to its k nearest, then each edge's far end is rewired to a
    uniformly random agent with probability p (no self-loops, no duplicates)."""

    kind: Literal["watts_strogatz"] = Field(title="Kind", description="small world")
    k: int = Field(
        ge=2,
        title="Ring neighbours",
        description="neighbours per agent on the ring before rewiring: even, less than size",
    )
    p: float = Field(
        ge=0,
        le=1,
        allow_inf_nan=False,
        title="Rewiring probability",
        description="chance that an edge's far end moves to a random agent, 0 to 1",
    )

    @field_validator("k")
    @classmethod
    def _even(cls, k: int) -> int:
        if k % 2:
            raise PydanticCustomError(
                ERROR_TYPE, "{reason}", {"reason": f"k must be even (k/2 on each side), got {k}"}
            )
        return k


class BarabasiAlbertGraph(_Strict):
    """Preferential attachment: each new agent links to m distinct earlier ones, chosen in
    proportion to their degree (networkx's process: a star of m + 1 agents to start)."""

    kind: Literal["barabasi_albert"] = Field(title="Kind", description="scale-free")
    m: int = Field(
        ge=1,
        title="Links per agent",
        description="edges each arriving agent makes; mean degree is about 2m; less than size",
    )


class CliquesGraph(_Strict):
    """Disjoint complete groups of contiguous ids (agents 0..size-1, size..2·size-1, ...): one
    run holds many independent, equal replicas."""

    kind: Literal["cliques"] = Field(title="Kind", description="disjoint complete groups")
    size: int = Field(
        ge=2,
        le=MAX_CLIQUE_SIZE,
        title="Clique size",
        description="agents per group; must divide the population's size so replicas are equal",
    )


class NodeTable(_Strict):
    """Node attributes, one row per node id; its ids are the population's agents."""

    upload: str = Field(
        pattern=UPLOAD, title="Upload", description="name of the uploaded CSV or Parquet file"
    )
    id_column: str = Field(
        "id", pattern=COLUMN, title="Id column", description="column holding the node id"
    )


class EdgeListGraph(_Strict):
    """A real network uploaded as CSV or Parquet with a source and a target column.

    Ids (integers or strings) become agents 0..n-1 in `order`: `sorted` (default: ascending ids,
    integers numerically, so reordering the file's rows gives the same graph) or `first_seen`
    (reading row by row, source before target) or `locality` (breadth first over the graph from
    ascending ids: worker_server.graphs.locality). With `nodes`, the node table's ids are the agents
    (isolated nodes included; `first_seen` then means its row order) and an edge naming another
    id is an error.
    """

    kind: Literal["edge_list"] = Field(title="Kind", description="an uploaded edge list")
    upload: str = Field(
        pattern=UPLOAD, title="Upload", description="name of the uploaded CSV or Parquet file"
    )
    format: Literal["csv", "parquet"] | None = Field(
        None, title="Format", description="csv or parquet; left out, read from the file's bytes"
    )
    source: str = Field("source", pattern=COLUMN, title="Source column")
    target: str = Field("target", pattern=COLUMN, title="Target column")
    order: Literal["sorted", "first_seen", "locality"] = Field(
        "sorted",
        title="Id order",
        description="how ids map to agent indices: ascending ids, as first seen, or breadth "
        "first from a lowest-degree node of each component (neighbours get nearby numbers, so "
        "the id ranges placed on each worker cut few edges)",
    )
    duplicates: Literal["reject", "merge"] = Field(
        "reject",
        title="Duplicates",
        description="a pair listed twice (either direction): reject the file, or keep one edge "
        "(for files that list each edge both ways)",
    )
    nodes: NodeTable | None = Field(
        None, title="Node attributes", description="optional table joined to agents by id"
    )


GraphSpec = Annotated[
    CompleteGraph
    | ErdosRenyiGraph
    | WattsStrogatzGraph
    | BarabasiAlbertGraph
    | CliquesGraph
    | EdgeListGraph,
    Field(discriminator="kind"),
]
GRAPH_SPEC: TypeAdapter[GraphSpec] = TypeAdapter(GraphSpec)

GENERATED_KINDS = ("erdos_renyi", "watts_strogatz", "barabasi_albert", "cliques")


def parse_graph_spec(data: Any) -> GraphSpec:
    return GRAPH_SPEC.validate_python(data)


def expected_edges(spec: GraphSpec, size: int) -> int:
    """Undirected edges the spec makes at this size (expected for erdos_renyi; 0 for complete
    and for edge_list, which is counted when parsed)."""
    match spec:
        case ErdosRenyiGraph():
            return round(size * spec.mean_degree / 2)
        case WattsStrogatzGraph():
            return size * spec.k // 2
        case BarabasiAlbertGraph():
            return spec.m * max(size - spec.m, 0)
        case CliquesGraph():
            return size * (spec.size - 1) // 2
    return 0


def stored_bytes(edges: int, size: int) -> int:
    """Bytes of the CSR file: int64 indptr plus int32 neighbour lists (both directions)."""
    return 8 * (size + 1) + 4 * 2 * edges


def problems_for_size(spec: GraphSpec, size: int) -> list[Problem]:
    """What is wrong with this spec for a population of `size` agents (empty when fine)."""
    problems: list[Problem] = []
    match spec:
        case ErdosRenyiGraph() if spec.mean_degree > size - 1:
            problems.append(
                (
                    ("mean_degree",),
                    f"mean_degree {spec.mean_degree:g} must be at most size - 1 = {size - 1}",
                    spec.mean_degree,
                )
            )
        case WattsStrogatzGraph() if spec.k >= size:
            problems.append((("k",), f"k {spec.k} must be less than size {size}", spec.k))
        case BarabasiAlbertGraph() if spec.m >= size:
            problems.append((("m",), f"m {spec.m} must be less than size {size}", spec.m))
        case CliquesGraph() if size % spec.size:
            below = max(d for d in range(1, spec.size + 1) if size % d == 0)
            problems.append(
                (
                    ("size",),
                    f"clique size {spec.size} does not divide the population size {size} "
                    f"(largest divisor below it: {below}); groups must be equal replicas",
                    spec.size,
                )
            )
    # Counted only for params in range: a mean degree near float's limit overflows the count.
    edges = 0 if problems else expected_edges(spec, size)
    if edges > MAX_GRAPH_EDGES:
        field = {"erdos_renyi": "mean_degree", "watts_strogatz": "k", "barabasi_albert": "m"}
        problems.append(
            (
                (field.get(spec.kind, "size"),),
                f"the graph would hold {edges:,} edges (about "
                f"{stored_bytes(edges, size) / 2**20:,.0f} MiB stored); at most "
                f"{MAX_GRAPH_EDGES:,} are allowed",
                getattr(spec, field.get(spec.kind, "size"), None),
            )
        )
    return problems


def check_for_size(spec: GraphSpec, size: int) -> None:
    """Raise a ValidationError (locs relative to the graph section) if the spec does not fit."""
    problems = problems_for_size(spec, size)
    if problems:
        raise ValidationError.from_exception_data(
            "GraphSpec",
            [
                {
                    "type": PydanticCustomError(ERROR_TYPE, "{reason}", {"reason": msg}),
                    "loc": loc,
                    "input": value,
                }
                for loc, msg, value in problems
            ],
        )
