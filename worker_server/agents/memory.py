"""Which rounds a population's memory rings hold, and memory that comes with moved agents.

Each agent keeps its own latest decisions in a ring (worker_server.agents.columns). A
population's `MemoryLog` names the simulation they were made in and the rounds of the latest
entries: for every agent of the population, the ring's last len(rounds) entries are from
rounds[0], ..., rounds[-1] (oldest first). Every write moves all agents' rings together, so the
log holds for all of them (NaN: an empty entry, the agent did not play that round here and
brought no memory of it; -inf: no valid answer, or sat the round out).

Agents that move here mid-simulation (re-placed from a dead worker, restored after a restart)
bring what they remember as `StagedMemory`, rebuilt by the manager from persisted decisions:
their rings are filled aligned with the population's log (see `upload_log`).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from worker_server.agents.errors import InvalidBatch


@dataclass
class MemoryLog:
    """The simulation and rounds (strictly increasing, at most the ring's width) of the latest
    entries of every agent's memory ring in one population."""

    simulation_id: str
    rounds: list[int]

    def stale(self, round: int) -> int:
        """How many of the latest entries are from `round` or later (a replay's to forget)."""
        return len(self.rounds) - bisect.bisect_left(self.rounds, round)

    def seen_by(
        self, simulation_id: str, round: int, memory_size: int
    ) -> tuple[tuple[int, ...], int]:
        """What agents remember when they play `round` of `simulation_id`: the rounds of their
        visible entries (the last memory_size before `round`), and how many latest entries
        they must not see (from the rounds a replay re-plays; all of another simulation's)."""
        if simulation_id != self.simulation_id:
            return (), len(self.rounds)
        stale = self.stale(round)
        earlier = self.rounds[: len(self.rounds) - stale]
        return tuple(earlier[-memory_size:]), stale


@dataclass(frozen=True)
class StagedMemory:
    """What the agents of one batch remember of a simulation: values[i, j] is agent i's
    decision in rounds[j] (float32 as in the rings; -inf = no valid answer)."""

    simulation_id: str
    rounds: np.ndarray  # int64, strictly increasing
    values: np.ndarray  # float32, shape (agents, len(rounds))

    def aligned_with(self, rounds: Sequence[int], width: int) -> tuple[np.ndarray, np.ndarray]:
        """The batch's memory rings, (n, width) float32, and their next slots, holding one
        entry per round of `rounds` (the population's log; a round the batch has no memory
        of is -inf)."""
        n = len(self.values)
        logged = np.asarray(rounds, dtype=np.int64)
        ring = np.full((n, width), np.nan, dtype=np.float32)
        entries = np.full((n, len(logged)), -np.inf, dtype=np.float32)
        if len(self.rounds) and len(logged):
            at = np.searchsorted(self.rounds, logged)
            clipped = np.minimum(at, len(self.rounds) - 1)
            known = self.rounds[clipped] == logged
            entries[:, known] = self.values[:, clipped[known]]
        ring[:, : len(logged)] = entries
        nexts = np.full(n, len(logged) % width, dtype=np.uint8)
        return ring, nexts


def upload_log(
    log: MemoryLog | None,
    memories: Sequence[tuple[int, StagedMemory]],
    width: int,
) -> tuple[MemoryLog | None, bool]:
    """The population's log once an upload's batches (index, memory) are added, and whether the
    agents already hosted must start from empty rings.

    - no memory in the upload: the log as it is;
    - a log of the same simulation: kept; the new agents are aligned with it (rounds the log
      has and a batch lacks are -inf; rounds a batch has and the log lacks are dropped);
    - no log here (the population is new here, or never played), or one of another simulation:
      a new log of the batches' rounds (the last `width`); hosted agents forget another
      simulation's memory.
    Raises InvalidBatch when batches of one population disagree on the simulation.
    """
    if not memories:
        return log, False
    first_index, first = memories[0]
    for index, memory in memories[1:]:
        if memory.simulation_id != first.simulation_id:
            raise InvalidBatch(
                index,
                "memory.simulation_id",
                f"{memory.simulation_id!r} differs from {first.simulation_id!r} in batch "
                f"{first_index} for the same population",
            )
    if log is not None and log.simulation_id == first.simulation_id:
        return log, False
    rounds = np.unique(np.concatenate([m.rounds for _, m in memories]))
    # Hosted agents without a log have nothing to remember yet; forgetting is harmless then.
    return MemoryLog(first.simulation_id, [int(r) for r in rounds[-width:]]), True
