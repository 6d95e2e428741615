"""What a population's record says about its graph: degrees, components, clustering.

All vectorised; components by hook-and-compress label merging (a few passes over the edges,
each halving the labels left), clustering as the share of closed wedges among sampled ones.
"""

from __future__ import annotations

import math

import numpy as np

from worker_server.graphs.csr import Graph

# Components need every edge in memory twice over (int64 copies); past this the record leaves
# the count out rather than spend a worker's worth of memory on a number.
MAX_COMPONENT_EDGES = 50_000_000
CLUSTERING_SAMPLES = 20_000


def degree_stats(graph: Graph) -> dict[str, float | int]:
    degree = graph.degrees()
    return {
        "nodes": graph.nodes,
        "edges": graph.edges,
        "mean_degree": float(degree.mean()) if graph.nodes else 0.0,
        "min_degree": int(degree.min()) if graph.nodes else 0,
        "max_degree": int(degree.max()) if graph.nodes else 0,
        "isolated": int(np.count_nonzero(degree == 0)),
    }


def degree_histogram(graph: Graph) -> list[int]:
    """Agents per degree bin: [0], [1], [2, 3], [4, 7], ... (bin b ≥ 1 holds 2^(b-1)..2^b - 1);
    a few dozen numbers however skewed the graph (the population page draws it)."""
    degree = graph.degrees()
    bins = np.zeros(degree.size, dtype=np.int64)
    positive = degree > 0
    bins[positive] = np.floor(np.log2(degree[positive])).astype(np.int64) + 1
    return np.bincount(bins).tolist() if degree.size else []


def component_labels(graph: Graph) -> np.ndarray:
    """Per agent, the smallest id in its connected component."""
    n = graph.nodes
    label = np.arange(n, dtype=np.int64)
    rows = np.repeat(np.arange(n, dtype=np.int64), graph.degrees())
    upper = rows < graph.indices  # each undirected edge once
    u, v = rows[upper], np.asarray(graph.indices)[upper].astype(np.int64)
    del rows, upper
    while u.size:
        lu, lv = label[u], label[v]
        differ = lu != lv
        if not differ.any():
            break
        u, v, lu, lv = u[differ], v[differ], lu[differ], lv[differ]
        # Hook: every root points at the smallest root it touches (labels only ever decrease,
        # so no cycle forms), then compress every path to its root.
        np.minimum.at(label, np.maximum(lu, lv), np.minimum(lu, lv))
        while True:
            hop = label[label]
            if np.array_equal(hop, label):
                break
            label = hop
    return label


def components(graph: Graph) -> int | None:
    """Connected components (isolated agents count one each); None for graphs too large."""
    if graph.edges > MAX_COMPONENT_EDGES:
        return None
    label = component_labels(graph)
    return int(np.count_nonzero(label == np.arange(graph.nodes)))


def has_edges(graph: Graph, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Whether each (u, v) is an edge, by a binary search within u's sorted row, all at once."""
    lo = graph.indptr[u].astype(np.int64)
    hi = graph.indptr[u + 1].astype(np.int64)
    width = int((hi - lo).max()) if u.size else 0
    for _ in range(max(width, 1).bit_length()):
        mid = (lo + hi) // 2
        go_right = (mid < hi) & (np.asarray(graph.indices)[np.minimum(mid, hi - 1)] < v)
        lo = np.where(go_right, mid + 1, lo)
        hi = np.where(go_right, hi, mid)
    found = lo < graph.indptr[u + 1]
    found[found] = np.asarray(graph.indices)[lo[found]] == v[found]
    return found


def clustering_estimate(
    graph: Graph, seed: int = 0, samples: int = CLUSTERING_SAMPLES
) -> dict[str, float] | None:
    """Global clustering (transitivity) from wedges sampled in proportion to their number,
    with its standard error; None when the graph has no wedge."""
    degree = graph.degrees().astype(np.float64)
    wedges = degree * (degree - 1) / 2
    total = wedges.sum()
    if total == 0:
        return None
    rng = np.random.default_rng(seed)
    centre = np.searchsorted(np.cumsum(wedges), rng.random(samples) * total, side="right")
    centre = np.minimum(centre, graph.nodes - 1)
    d = graph.degrees()[centre]
    first = rng.integers(0, d)
    second = rng.integers(0, d - 1)
    second += second >= first  # two distinct neighbours
    start = graph.indptr[centre]
    a = np.asarray(graph.indices)[start + first].astype(np.int64)
    b = np.asarray(graph.indices)[start + second].astype(np.int64)
    closed = has_edges(graph, a, b).mean()
    return {
        "clustering": float(closed),
        "stderr": float(math.sqrt(closed * (1 - closed) / samples)),
    }
