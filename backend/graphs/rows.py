"""Rows of a CSR block, gathered: what one worker gets of a population's graph."""

from __future__ import annotations

import numpy as np

from worker_server.graphs.csr import Graph


def take_rows(graph: Graph, rows: np.ndarray | slice) -> Graph:
    """The given rows of a CSR block as their own block (a slice is a plain copy)."""
    if isinstance(rows, slice):
        start, stop, step = rows.indices(graph.nodes)
        if step == 1:
            return graph.rows(start, max(start, stop))
        rows = np.arange(start, stop, step)
    rows = np.asarray(rows, dtype=np.int64)
    starts = graph.indptr[rows]
    degree = graph.indptr[rows + 1] - starts
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(degree, out=indptr[1:])
    positions = np.arange(int(indptr[-1]), dtype=np.int64) + np.repeat(starts - indptr[:-1], degree)
    return Graph(len(rows), indptr, np.asarray(graph.indices)[positions])


def wire_rows(graph: Graph, start: int, stop: int) -> tuple[bytes, bytes]:
    """Rows start..stop-1 as AgentBatch.graph's bytes: offsets int64 LE (from 0, one more than
    the rows), neighbour numbers int32 LE."""
    ptr = np.asarray(graph.indptr[start : stop + 1], dtype=np.int64)
    numbers = np.asarray(graph.indices[ptr[0] : ptr[-1]])
    return (ptr - ptr[0]).astype("<i8").tobytes(), numbers.astype("<i4").tobytes()
