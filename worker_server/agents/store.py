"""Every agent hosted in this process, by population, with capacity accounting.

Uploads are all-or-nothing: batches are staged (each one reserving capacity, so concurrent
uploads can never overshoot it together) and only `commit()` makes them visible, after checking
ids against the whole upload and everything already hosted.

The store also keeps each population's memory log (worker_server.agents.memory): rounds write
it through `record_round`, uploads with memory align the new agents with it, and it goes when
the population's last agent here does.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

from worker_server.agents.columns import (
    DEFAULT_MEMORY_SIZE,
    Agent,
    Population,
    StagedBatch,
    merge_population,
    ring_width,
)
from worker_server.agents.errors import CapacityExceeded, InvalidBatch
from worker_server.agents.memory import MemoryLog, upload_log

MAX_MEMORY_SIZE = 255  # memory_next is a uint8 and the ring holds memory_size + 1 entries


class AgentStore:
    def __init__(
        self,
        capacity: int,
        *,
        memory_size: int = DEFAULT_MEMORY_SIZE,
        on_total_change: Callable[[int], None] | None = None,
    ) -> None:
        if capacity < 0:
            raise ValueError("capacity must be >= 0")
        if not 1 <= memory_size <= MAX_MEMORY_SIZE:
            raise ValueError(f"memory_size must be in 1..{MAX_MEMORY_SIZE}")
        self.capacity = capacity
        self.memory_size = memory_size
        self._populations: dict[str, Population] = {}
        self._logs: dict[str, MemoryLog] = {}
        self._total = 0
        self._reserved = 0
        # gRPC handlers share one event loop, but the lock keeps reserve/commit atomic even if a
        # caller ever runs them from a thread.
        self._lock = threading.Lock()
        self._on_total_change = on_total_change

    # -- reading ---------------------------------------------------------------------------

    @property
    def total(self) -> int:
        return self._total

    @property
    def reserved(self) -> int:
        return self._reserved

    def population(self, population_id: str) -> Population | None:
        return self._populations.get(population_id)

    def memory_log(self, population_id: str) -> MemoryLog | None:
        return self._logs.get(population_id)

    def memory_seen_by(
        self, population_id: str, simulation_id: str, round: int
    ) -> tuple[tuple[int, ...], int]:
        """What the population's agents remember when they play `round` of `simulation_id`:
        the rounds of their visible entries, and how many latest entries to hide (MemoryLog)."""
        log = self._logs.get(population_id)
        if log is None:
            return (), 0
        return log.seen_by(simulation_id, round, self.memory_size)

    def population_counts(self) -> dict[str, int]:
        return {pid: len(p) for pid, p in self._populations.items()}

    def nbytes(self) -> int:
        return sum(p.nbytes() for p in self._populations.values())

    def list_agents(
        self, population_id: str | None, after_id: int | None, limit: int
    ) -> tuple[list[Agent], int | None]:
        """One keyset page ordered by id: the agents, and the after_id of the next page if any."""
        if limit < 1:
            raise ValueError("limit must be >= 1")
        if population_id:
            population = self._populations.get(population_id)
            sources = [population] if population is not None else []
        else:
            sources = list(self._populations.values())
        candidates = []
        remaining = 0
        for population in sources:
            first = (
                0 if after_id is None else int(np.searchsorted(population.ids, after_id, "right"))
            )
            remaining += len(population) - first
            rows = np.arange(first, min(first + limit, len(population)), dtype=np.int64)
            if len(rows):
                candidates.append((population, rows))
        if not candidates:
            return [], None
        ids = np.concatenate([p.ids[rows] for p, rows in candidates])
        owner = np.concatenate([np.full(len(rows), i) for i, (_, rows) in enumerate(candidates)])
        row = np.concatenate([rows for _, rows in candidates])
        page = np.argsort(ids, kind="stable")[:limit]
        by_id: dict[int, Agent] = {}
        for i, (population, _) in enumerate(candidates):
            mine = page[owner[page] == i]
            for agent in population.agents(row[mine]):
                by_id[agent.id] = agent
        agents = [by_id[i] for i in ids[page].tolist()]
        next_after = agents[-1].id if remaining > limit else None
        return agents, next_after

    # -- writing ---------------------------------------------------------------------------

    def upload(self) -> Upload:
        return Upload(self)

    def delete_population(self, population_id: str) -> int:
        with self._lock:
            population = self._populations.pop(population_id, None)
            self._logs.pop(population_id, None)
            deleted = len(population) if population is not None else 0
            self._set_total(self._total - deleted)
        return deleted

    def delete_ids(self, ids: np.ndarray) -> int:
        ids = np.unique(np.asarray(ids, dtype=np.int64))
        deleted = 0
        with self._lock:
            for pid, population in list(self._populations.items()):
                _, found = population.rows_of(ids)
                if not found.any():
                    continue
                keep = np.ones(len(population), dtype=bool)
                rows, _ = population.rows_of(ids[found])
                keep[rows] = False
                deleted += int(found.sum())
                if keep.any():
                    self._populations[pid] = population.take(np.flatnonzero(keep))
                else:
                    del self._populations[pid]
                    self._logs.pop(pid, None)
            self._set_total(self._total - deleted)
        return deleted

    def delete_all(self) -> int:
        with self._lock:
            deleted = self._total
            self._populations.clear()
            self._logs.clear()
            self._set_total(0)
        return deleted

    def record_round(
        self,
        snapshot: Population,
        simulation_id: str,
        round: int,
        rows: np.ndarray,
        values: np.ndarray,
    ) -> None:
        """Write a completed round into the population's memory: `snapshot`'s rows (the agents
        that played) decided values[i] (-inf: no valid answer).

        With the population's log of the same simulation (another simulation's is forgotten
        first, as is everything when round 1 is played again):
        - round > the last logged: every agent's ring gets a new entry (-inf for those that
          did not play), then the players' decisions are written into it;
        - round == the last logged: a replay (of some agents, or all): the players' latest
          entries are overwritten, nothing is appended;
        - round < the last logged: the log's rounds >= round are rolled back for every agent,
          then as a new round.
        A round runs on the population as it was when it started; if agents were added or
        deleted since, the decisions are matched to the current rows by id (deleted agents are
        skipped, added ones count as not having played).
        """
        with self._lock:
            current = self._populations.get(snapshot.population_id)
            if current is None:
                return
            if current is not snapshot and len(rows):
                now_rows, found = current.rows_of(snapshot.ids[rows])
                rows, values = now_rows[found], values[found]
            log = self._logs.get(snapshot.population_id)
            if log is None or log.simulation_id != simulation_id:
                current.forget()
                log = self._logs[snapshot.population_id] = MemoryLog(simulation_id, [])
            stale = log.stale(round)
            if stale == 1 and log.rounds[-1] == round:
                current.write_latest(rows, values)
                return
            if stale:
                current.rewind(stale)
                del log.rounds[len(log.rounds) - stale :]
            current.advance()
            current.write_latest(rows, values)
            log.rounds.append(round)
            del log.rounds[: max(0, len(log.rounds) - current.memory_width)]

    # -- internals used by Upload ----------------------------------------------------------

    def _reserve(self, n: int, asked: int) -> None:
        with self._lock:
            if self._total + self._reserved + n > self.capacity:
                others = self._reserved - (asked - n)
                raise CapacityExceeded(self.capacity, self._total, others, asked)
            self._reserved += n

    def _release(self, n: int) -> None:
        with self._lock:
            self._reserved -= n

    def _commit(self, batches: list[StagedBatch], reserved: int) -> int:
        with self._lock:
            _check_ids(batches, self._populations)
            groups: dict[str, list[StagedBatch]] = {}
            for batch in batches:
                groups.setdefault(batch.population_id, []).append(batch)
            merged: dict[str, Population] = {}
            logs: dict[str, MemoryLog] = {}
            width = ring_width(self.memory_size)
            for pid, group in groups.items():
                memories = [(b.index, b.memory) for b in group if b.memory is not None]
                log, forget = upload_log(self._logs.get(pid), memories, width)
                if log is not None:
                    logs[pid] = log
                merged[pid] = merge_population(
                    pid,
                    self._populations.get(pid),
                    group,
                    self.memory_size,
                    log.rounds if log is not None else (),
                    forget,
                )
            # Nothing above mutated the store: a failure leaves it as it was.
            self._populations.update(merged)
            self._logs.update(logs)
            created = sum(len(b) for b in batches)
            self._reserved -= reserved
            self._set_total(self._total + created)
        return created

    def _set_total(self, total: int) -> None:
        self._total = total
        if self._on_total_change is not None:
            self._on_total_change(total)


class Upload:
    """One CreateAgents stream: staged batches, committed together or not at all."""

    def __init__(self, store: AgentStore) -> None:
        self._store = store
        self._batches: list[StagedBatch] = []
        self._reserved = 0
        self._finished = False

    @property
    def staged(self) -> int:
        return self._reserved

    def add(self, batch: StagedBatch) -> None:
        """Stage a batch, reserving capacity for it (raises CapacityExceeded)."""
        if self._finished:
            raise RuntimeError("upload already finished")
        self._store._reserve(len(batch), asked=self._reserved + len(batch))
        self._reserved += len(batch)
        self._batches.append(batch)

    def commit(self) -> int:
        """Make every staged agent visible; raises InvalidBatch (and creates nothing) on bad ids."""
        if self._finished:
            raise RuntimeError("upload already finished")
        try:
            created = self._store._commit(self._batches, self._reserved) if self._batches else 0
        except BaseException:
            self.abort()
            raise
        self._finished = True
        self._batches = []
        return created

    def abort(self) -> None:
        """Drop the staged batches and their reservation (a no-op once finished)."""
        if self._finished:
            return
        self._finished = True
        self._store._release(self._reserved)
        self._batches = []

    def __enter__(self) -> Upload:
        return self

    def __exit__(self, *exc) -> None:
        self.abort()


def _check_ids(batches: list[StagedBatch], hosted: dict[str, Population]) -> None:
    """Ids must be unique within the upload and not hosted here already (any population)."""
    if not batches:
        return
    ids = np.sort(np.concatenate([b.ids for b in batches]))
    repeated = ids[1:][ids[1:] == ids[:-1]]
    if len(repeated):
        agent = int(repeated[0])
        where = [b.index for b in batches if bool(np.any(b.ids == agent))]
        first, batch = (where[0], where[1]) if len(where) > 1 else (where[0], where[0])
        raise InvalidBatch(
            batch,
            "agent_ids",
            f"agent {agent} appears more than once in this upload (first in batch {first})",
        )
    for population in hosted.values():
        _, found = population.rows_of(ids)
        if found.any():
            agent = int(ids[np.argmax(found)])
            batch = next(b.index for b in batches if bool(np.any(b.ids == agent)))
            raise InvalidBatch(
                batch,
                "agent_ids",
                f"agent {agent} is already hosted here (population {population.population_id!r})",
            )
