"""A cohort's neighbour values as the SDK's Neighbours read them (populace.plugin.NeighbourValues),
without gathering every entry when a policy needs less.

A process's table of values is over "keys" (its agents and their neighbours); each CSR entry of
its agents' rows points at a key (network._Layout.neighbour_at). Gathering a cohort's values costs
one read per entry, about ten an agent, every round. Most rules need less:

- `at(positions)` reads only the entries a policy picked (the voter's one neighbour an agent);
- `count_of(value)` counts, per agent, the neighbours holding a value by walking from the keys
  that hold it to the agents that neighbour them (the entries grouped by key, built once per
  layout): an epidemic touches its infectious agents' edges, not the whole graph. The counts are
  made once per round and value for every agent of the process, and each cohort takes its rows.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Holders:
    """The layout's entries grouped by the key they point at: the rows neighbouring key k are
    rows[offsets[k]:offsets[k + 1]] (the transpose of the process's block)."""

    offsets: np.ndarray  # int64, one more than the keys
    rows: np.ndarray  # int32 (int64 past 2^31 rows), the row of each entry, grouped by key

    @classmethod
    def of(cls, offsets: np.ndarray, neighbour_at: np.ndarray, keys: int) -> Holders:
        agents = len(offsets) - 1
        entry_row = np.repeat(np.arange(agents, dtype=np.int64), np.diff(offsets))
        # One sort of (key, row) packed in an int64: a third of a stable argsort's time, and it
        # leaves each key's rows ascending.
        packed = neighbour_at.astype(np.int64) * max(agents, 1) + entry_row
        del entry_row
        packed.sort()
        grouped = np.zeros(keys + 1, dtype=np.int64)
        np.cumsum(np.bincount(neighbour_at, minlength=keys), out=grouped[1:])
        row_dtype = np.int32 if agents < 2**31 else np.int64
        return cls(offsets=grouped, rows=(packed % max(agents, 1)).astype(row_dtype))

    def count_around(self, held: np.ndarray, agents: int) -> np.ndarray:
        """Per row, how many of its entries point at a key where `held` is True."""
        keys = np.flatnonzero(held)
        starts, ends = self.offsets[keys], self.offsets[keys + 1]
        lengths = ends - starts
        total = int(lengths.sum())
        if not total:
            return np.zeros(agents, dtype=np.int64)
        firsts = np.zeros(len(keys), dtype=np.int64)
        np.cumsum(lengths[:-1], out=firsts[1:])
        at = np.arange(total, dtype=np.int64) + np.repeat(starts - firsts, lengths)
        return np.bincount(self.rows[at], minlength=agents).astype(np.int64)


@dataclass
class RoundCounts:
    """One round's per-row counts by value, shared by the round's cohorts (a race between two
    cohorts computes one twice, alike)."""

    before: np.ndarray  # values over keys after the last round
    holders: Callable[[], Holders]  # the layout's, built at the first count
    agents: int
    _by_value: dict[float, np.ndarray] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def count_of(self, value: float) -> np.ndarray:
        with self._lock:
            counts = self._by_value.get(value)
        if counts is None:
            counts = self.holders().count_around(self.before == value, self.agents)
            with self._lock:
                self._by_value[value] = counts
        return counts


@dataclass(frozen=True)
class CohortValues:
    """One cohort's neighbour values (a populace.plugin.NeighbourValues)."""

    before: np.ndarray  # values over keys after the last round
    entry_keys: np.ndarray  # the key of each of the cohort's entries (a view where it can be)
    rows: np.ndarray  # the cohort's rows
    counts: RoundCounts

    def gather(self) -> np.ndarray:
        return self.before[self.entry_keys]

    def at(self, positions: np.ndarray) -> np.ndarray:
        return self.before[self.entry_keys[positions]]

    def count_of(self, value: float) -> np.ndarray:
        return self.counts.count_of(value)[self.rows]
