"""How many edges a contiguous id-range placement cuts (messages that leave their process).

Placement by id ranges gives part p the agents bounds[p]..bounds[p+1]-1. An edge is cut when
its ends fall in different parts; the cut fraction is cut edges over all edges. One pass per
part over that part's neighbour lists (parts are few), so it also runs on a mapped file.
"""

from __future__ import annotations

import numpy as np

from worker_server.graphs.csr import Graph


def even_bounds(nodes: int, parts: int) -> np.ndarray:
    """Bounds of `parts` contiguous ranges whose sizes differ by at most one (np.array_split)."""
    if parts < 1:
        raise ValueError(f"parts must be at least 1, got {parts}")
    size, extra = divmod(nodes, parts)
    sizes = np.full(parts, size, dtype=np.int64)
    sizes[:extra] += 1
    return np.concatenate([[0], np.cumsum(sizes)])


def _check_bounds(nodes: int, bounds: np.ndarray) -> np.ndarray:
    bounds = np.asarray(bounds, dtype=np.int64)
    if bounds.size < 2 or bounds[0] != 0 or bounds[-1] != nodes or np.any(np.diff(bounds) < 0):
        raise ValueError(f"bounds must rise from 0 to {nodes}, got {bounds.tolist()}")
    return bounds


def cut_edges(graph: Graph, bounds: np.ndarray) -> int:
    """Undirected edges whose ends lie in different ranges."""
    bounds = _check_bounds(graph.nodes, bounds)
    crossing = 0
    for first, stop in zip(bounds[:-1], bounds[1:], strict=True):
        block = graph.indices[graph.indptr[first] : graph.indptr[stop]]
        crossing += int(np.count_nonzero((block < first) | (block >= stop)))
    return crossing // 2  # each cut edge is seen from both of its ends


def cut_fraction(graph: Graph, bounds: np.ndarray) -> float:
    return cut_edges(graph, bounds) / graph.edges if graph.edges else 0.0


def complete_cut_fraction(nodes: int, bounds: np.ndarray) -> float:
    """The same for a complete graph (no edges stored): pairs split across parts over all."""
    sizes = np.diff(_check_bounds(nodes, bounds)).astype(np.float64)
    pairs = nodes * (nodes - 1) / 2
    return float(1 - (sizes * (sizes - 1) / 2).sum() / pairs) if pairs else 0.0
