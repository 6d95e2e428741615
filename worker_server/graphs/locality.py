"""A locality-preserving order of a graph's nodes (an edge list's `order: locality`): breadth
first from a lowest-degree node of each component (as Cuthill–McKee starts), so neighbours get
nearby numbers and the id ranges placement hands each worker cut few edges. Level by level over
the CSR arrays, whole frontiers at once (never a Python step per node)."""

from __future__ import annotations

import numpy as np

from worker_server.graphs.csr import Graph


def locality_order(graph: Graph) -> np.ndarray:
    """A permutation of the nodes: order[k] is the node numbered k. Components come in the
    order of their lowest-degree node (ties: the lower node), isolated nodes last; within a
    level, nodes in the order their first neighbour in the level before was reached."""
    n = graph.nodes
    degrees = graph.degrees()
    visited = np.zeros(n, dtype=bool)
    visited[degrees == 0] = True  # numbered at the end, in node order
    # Candidate starts by degree then node: the first unvisited one starts the next component.
    starts = np.lexsort((np.arange(n), degrees))
    order = np.empty(n, dtype=np.int64)
    filled, next_start = 0, 0
    while True:
        while next_start < n and visited[starts[next_start]]:
            next_start += 1
        if next_start == n:
            break
        frontier = starts[next_start : next_start + 1].astype(np.int64)
        visited[frontier] = True
        while frontier.size:
            order[filled : filled + frontier.size] = frontier
            filled += frontier.size
            frontier = _next_level(graph, frontier, visited)
    isolated = np.flatnonzero(degrees == 0)
    order[filled:] = isolated
    return order


def _next_level(graph: Graph, frontier: np.ndarray, visited: np.ndarray) -> np.ndarray:
    """The unvisited neighbours of a frontier, each once, in the order they are first met."""
    begin, end = graph.indptr[frontier], graph.indptr[frontier + 1]
    counts = end - begin
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    # Positions of every frontier node's neighbour entries, concatenated in frontier order.
    offsets = np.repeat(begin - np.cumsum(counts) + counts, counts) + np.arange(total)
    met = np.asarray(graph.indices[offsets], dtype=np.int64)
    met = met[~visited[met]]
    if not met.size:
        return met
    _, first = np.unique(met, return_index=True)
    level = met[np.sort(first)]
    visited[level] = True
    return level


def relabel(graph: Graph, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The new number of each old node (inverse of `order`), and the graph's edges as
    (u, v) in new numbers."""
    new_of = np.empty(graph.nodes, dtype=np.int64)
    new_of[order] = np.arange(graph.nodes, dtype=np.int64)
    rows = np.repeat(np.arange(graph.nodes, dtype=np.int64), graph.degrees())
    columns = np.asarray(graph.indices, dtype=np.int64)
    upper = rows < columns  # each undirected edge once
    return new_of, np.stack([new_of[rows[upper]], new_of[columns[upper]]])
