"""Each hosted agent's row of its population's graph: whom it neighbours, as numbers.

A population with a graph sends every agent's neighbour list with the agent (AgentBatch.graph):
offsets (int64, one more than the batch's agents) and neighbour numbers (the neighbours' ids &
0xFFFFFFFF, ascending per agent). The worker keeps them as one CSR block per population, aligned
with its rows: two numpy arrays, however many agents, never a Python object per agent. Workers
never regenerate a graph: the manager's graph file is the one source of truth.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from worker_server.agents.errors import InvalidBatch
from worker_server.rpc import worker_pb2 as pb

NUMBER_MASK = np.int64(0xFFFFFFFF)


@dataclass(frozen=True)
class GraphRows:
    """Neighbour lists of n agents: agent r's are numbers[offsets[r]:offsets[r + 1]]."""

    offsets: np.ndarray  # int64, n + 1, offsets[0] == 0, never decreasing
    numbers: np.ndarray  # uint32

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def nbytes(self) -> int:
        return self.offsets.nbytes + self.numbers.nbytes

    def degrees(self) -> np.ndarray:
        return np.diff(self.offsets)

    def _gather(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(offsets of the rows' block, positions of their numbers in self.numbers)."""
        rows = np.asarray(rows, dtype=np.int64)
        starts = self.offsets[rows]
        degree = self.offsets[rows + 1] - starts
        offsets = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(degree, out=offsets[1:])
        total = int(offsets[-1])
        # Entry j of row i sits at starts[i] + j: one repeat and one arange, no loop per row.
        positions = np.arange(total, dtype=np.int64) + np.repeat(starts - offsets[:-1], degree)
        return offsets, positions

    def take(self, rows: np.ndarray) -> GraphRows:
        """The rows given (e.g. survivors of a delete, or a reorder), as their own block."""
        rows = np.asarray(rows, dtype=np.int64)
        if len(rows) == len(self) and (len(rows) == 0 or _is_identity(rows)):
            return self
        offsets, positions = self._gather(rows)
        return GraphRows(offsets, self.numbers[positions])

    def block(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(offsets int64 of len(rows) + 1, neighbour numbers int64) of the given rows."""
        rows = np.asarray(rows, dtype=np.int64)
        if len(rows) and _is_contiguous(rows):
            first, last = int(rows[0]), int(rows[-1])
            offsets = self.offsets[first : last + 2] - self.offsets[first]
            numbers = self.numbers[self.offsets[first] : self.offsets[last + 1]]
            return offsets, numbers.astype(np.int64)
        offsets, positions = self._gather(rows)
        return offsets, self.numbers[positions].astype(np.int64)


def _is_contiguous(rows: np.ndarray) -> bool:
    return int(rows[-1]) - int(rows[0]) == len(rows) - 1 and bool(np.all(np.diff(rows) == 1))


def _is_identity(rows: np.ndarray) -> bool:
    return int(rows[0]) == 0 and _is_contiguous(rows)


def empty_rows(n: int) -> GraphRows:
    """n agents without neighbours."""
    return GraphRows(np.zeros(n + 1, dtype=np.int64), np.empty(0, dtype=np.uint32))


def concat_rows(parts: Sequence[GraphRows]) -> GraphRows:
    """The parts' rows one after another."""
    if len(parts) == 1:
        return parts[0]
    degrees = [p.degrees() for p in parts]
    offsets = np.zeros(sum(len(p) for p in parts) + 1, dtype=np.int64)
    if len(offsets) > 1:
        np.cumsum(np.concatenate(degrees), out=offsets[1:])
    numbers = np.concatenate([p.numbers for p in parts]) if parts else np.empty(0, dtype=np.uint32)
    return GraphRows(offsets, numbers)


def decode_graph_rows(graph: pb.GraphRows, ids: np.ndarray, index: int) -> GraphRows:
    """Check and decode a batch's rows (raises InvalidBatch naming the field)."""
    n = len(ids)
    raw_offsets, raw_numbers = graph.offsets, graph.neighbours
    if len(raw_offsets) != 8 * (n + 1):
        raise InvalidBatch(
            index,
            "graph.offsets",
            f"has {len(raw_offsets)} bytes: needs {8 * (n + 1)} (int64 little-endian, one more "
            f"than the {n} agents)",
        )
    if len(raw_numbers) % 4:
        raise InvalidBatch(
            index,
            "graph.neighbours",
            f"has {len(raw_numbers)} bytes, not a multiple of 4 (int32 little-endian numbers)",
        )
    offsets = np.frombuffer(raw_offsets, dtype="<i8").astype(np.int64)
    # Numbers are id & 0xFFFFFFFF: read unsigned, every 32-bit pattern is a number below 2^32.
    numbers = np.frombuffer(raw_numbers, dtype="<u4").astype(np.uint32)
    if offsets[0] != 0:
        raise InvalidBatch(index, "graph.offsets", f"must start at 0, starts at {offsets[0]}")
    steps = np.diff(offsets)
    if len(steps) and int(steps.min()) < 0:
        at = int(np.argmax(steps < 0))
        raise InvalidBatch(
            index,
            "graph.offsets",
            f"must never decrease: offsets[{at + 1}] = {offsets[at + 1]} after {offsets[at]}",
        )
    if offsets[-1] != len(numbers):
        raise InvalidBatch(
            index,
            "graph.offsets",
            f"ends at {offsets[-1]}, but graph.neighbours holds {len(numbers)} numbers",
        )
    if len(numbers):
        row = np.repeat(np.arange(n, dtype=np.int64), steps)
        own = ids[row] & NUMBER_MASK
        loops = np.flatnonzero(own == numbers)
        if len(loops):
            agent = int(ids[row[loops[0]]])
            raise InvalidBatch(
                index, "graph.neighbours", f"agent {agent} lists itself as its neighbour"
            )
        # Ascending within each row: a step may only fall where a new row starts.
        falls = np.flatnonzero(numbers[1:].astype(np.int64) <= numbers[:-1].astype(np.int64))
        falls = falls[row[falls + 1] == row[falls]]
        if len(falls):
            agent = int(ids[row[falls[0]]])
            raise InvalidBatch(
                index,
                "graph.neighbours",
                f"agent {agent}'s neighbours are not strictly ascending (unsorted or repeated)",
            )
    return GraphRows(offsets, numbers)
