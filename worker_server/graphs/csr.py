"""The undirected simple graph in CSR form, and the one way edges become one.

Row i of `indices[indptr[i]:indptr[i + 1]]` lists agent i's neighbours in ascending order; each
undirected edge appears in both rows; no self-loops, no duplicates. indptr is int64 (a graph may
hold more than 2^31 entries), indices int32 while the ids fit (half the bytes), else int64.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

INT32_MAX = np.iinfo(np.int32).max


def index_dtype(nodes: int) -> np.dtype:
    return np.dtype(np.int32) if nodes - 1 <= INT32_MAX else np.dtype(np.int64)


@dataclass(frozen=True)
class Graph:
    """`nodes` agents; `indptr` (nodes + 1,) int64; `indices` (2 × edges,) sorted per row.

    The arrays may be memory-mapped (storage.open_graph): reading a row touches only its pages.
    """

    nodes: int
    indptr: np.ndarray
    indices: np.ndarray

    @property
    def edges(self) -> int:
        """Undirected edges (each is stored twice)."""
        return int(self.indptr[-1]) // 2

    def degrees(self) -> np.ndarray:
        return np.diff(self.indptr)

    def neighbours(self, agent: int) -> np.ndarray:
        return self.indices[self.indptr[agent] : self.indptr[agent + 1]]

    def rows(self, start: int, stop: int) -> Graph:
        """Agents start..stop-1 with their neighbour lists (global ids), as their own CSR block.

        The block's indptr starts at 0; `nodes` is the block's row count. On a memory-mapped
        graph only the block's pages are read, and the result is a copy in memory.
        """
        if not 0 <= start <= stop <= self.nodes:
            raise ValueError(f"rows {start}..{stop} outside 0..{self.nodes}")
        ptr = np.array(self.indptr[start : stop + 1], dtype=np.int64)
        block = np.array(self.indices[ptr[0] : ptr[-1]])
        return Graph(nodes=stop - start, indptr=ptr - ptr[0], indices=block)


def canonical_keys(u: np.ndarray, v: np.ndarray, nodes: int) -> np.ndarray:
    """One int64 per undirected pair: min * nodes + max (nodes ≤ 3·10^9 keeps it in range)."""
    lo = np.minimum(u, v).astype(np.int64)
    hi = np.maximum(u, v).astype(np.int64)
    return lo * nodes + hi


def from_keys(nodes: int, keys: np.ndarray, mirrored: np.ndarray | None = None) -> Graph:
    """The graph of sorted, distinct canonical keys (lo * nodes + hi, lo < hi).

    Sorted keys list each row's upper neighbours (hi > lo) in order already; only the lower half
    needs a sort, by (hi, lo): one sort of E keys instead of 2E, none when the caller has them
    (`mirrored`: the same edges as sorted hi * nodes + lo). A row's lower neighbours are all
    smaller than its upper ones, so each row is the lower run followed by the upper run.
    """
    lo, hi = np.divmod(keys, nodes)
    dtype = index_dtype(nodes)
    lower_keys = np.sort(hi * nodes + lo) if mirrored is None else mirrored
    lower_row, lower_col = np.divmod(lower_keys, nodes)
    del lower_keys
    lower_count = np.bincount(lower_row, minlength=nodes)
    upper_count = np.bincount(lo, minlength=nodes)
    indptr = np.zeros(nodes + 1, dtype=np.int64)
    np.cumsum(lower_count + upper_count, out=indptr[1:])
    indices = np.empty(2 * keys.size, dtype=dtype)
    # Entry j of a run lands at its row's start + its rank in the run (+ the lower run's
    # length for upper entries); ranks come from the run starts, no per-row loop.
    lower_start = indptr[:-1]
    upper_start = indptr[:-1] + lower_count
    indices[_slots(lower_row, lower_start, lower_count)] = lower_col
    indices[_slots(lo, upper_start, upper_count)] = hi
    return Graph(nodes=nodes, indptr=indptr, indices=indices)


def _slots(rows: np.ndarray, starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Positions for entries grouped by ascending row: starts[row] + rank within the row."""
    first = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=first[1:])
    shift = starts - first[:-1]  # rank = position - first[row], folded into one gather
    return np.arange(rows.size, dtype=np.int64) + shift[rows]


def from_edges(nodes: int, u: np.ndarray, v: np.ndarray) -> Graph:
    """The simple graph of undirected pairs (u, v); self-loops and repeats are dropped.

    Generators whose pairs are already distinct call `from_keys` on sorted keys directly.
    """
    keep = u != v
    keys = np.sort(canonical_keys(u[keep], v[keep], nodes))
    return from_keys(nodes, drop_repeats(keys))


def drop_repeats(sorted_values: np.ndarray) -> np.ndarray:
    """Distinct values of a sorted array (np.unique sorts again, and is slower in numpy 2.4)."""
    if sorted_values.size == 0:
        return sorted_values
    keep = np.empty(sorted_values.size, dtype=bool)
    keep[0] = True
    np.not_equal(sorted_values[1:], sorted_values[:-1], out=keep[1:])
    return sorted_values[keep]


def empty(nodes: int) -> Graph:
    return Graph(
        nodes=nodes,
        indptr=np.zeros(nodes + 1, dtype=np.int64),
        indices=np.empty(0, dtype=index_dtype(nodes)),
    )


def check_simple(graph: Graph) -> None:
    """Raise ValueError unless graph is a valid undirected simple CSR graph (tests, loads)."""
    indptr, indices, n = graph.indptr, graph.indices, graph.nodes
    if indptr.shape != (n + 1,) or indptr[0] != 0 or np.any(np.diff(indptr) < 0):
        raise ValueError("indptr must start at 0 and never decrease")
    if indices.size != indptr[-1]:
        raise ValueError(f"indices has {indices.size} entries, indptr says {indptr[-1]}")
    if indices.size == 0:
        return
    if indices.min() < 0 or indices.max() >= n:
        raise ValueError("a neighbour id is outside 0..nodes-1")
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    keys = rows * n + indices
    if np.any(np.diff(keys) <= 0):
        raise ValueError("a row is not strictly ascending (unsorted or duplicate neighbours)")
    if np.any(rows == indices):
        raise ValueError("a self-loop")
    mirrored = np.sort(indices.astype(np.int64) * n + rows)
    if not np.array_equal(mirrored, keys):
        raise ValueError("not symmetric: an edge is missing its reverse")
