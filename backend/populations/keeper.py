"""The placement keeper: every deployed population stays hosted by live workers.

The store is the source of truth for which agents a population has and where they live. A
repair of one population compares it with what the workers say they host, and:

- restores the agents of a live worker that does not host what the store places on it (a
  restarted process that registered again as the same worker, or agents removed behind the
  manager's back): its share of the population is removed and created again from the store;
- re-places the agents of a worker that is gone (removed, or offline past the grace period, or
  at once when a round is waiting for them) and of agents placed nowhere, onto online workers
  with free capacity: the store moves them first, then the workers get them, so a crash in
  between leaves a difference the next repair fixes;
- records how many agents are hosted: the population is `deployed` when all are, `degraded`
  (with both counts) otherwise.

A population with a worker process per agent (`placement.dedicated_process`) is re-placed only
onto processes that host nothing, one agent each, never onto shared ones; when none is free its
agents wait unplaced and the population is degraded with the reason as its error.

Agents are rebuilt from what is persisted: attributes are the population's seeded sample (the
same draw as at deploy), personas come from the store, graph rows from the population's graph
file, and an agent's memory of its own
decisions in the simulation it is playing comes from the stored decisions, so its next prompt is
the one it would have had where it was. A repair holds its population's lock, and so does each
RunRound of a simulation on it (hold()): the background pass and a round waiting for its agents
never repair the same population at once, and no agents arrive on a worker mid-round.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import timedelta

import numpy as np
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.cancellation import stop_if_cancelled
from backend.db.models import Population, Worker
from backend.db.times import utcnow
from backend.events.catalog import PopulationProgress, PopulationStage
from backend.events.hub import EventHub
from backend.lifecycles import population as lifecycle
from backend.populations import graph as population_graph
from backend.populations import memory as agent_memory
from backend.populations import store
from backend.populations.config import PlacementConfig, PopulationConfig
from backend.populations.deploy import (
    STREAM_BATCH,
    add_node_attributes,
    free_processes,
    free_slots,
)
from backend.populations.personas import render_template
from backend.populations.placement import Slot, place
from backend.populations.sampling import SampledPopulation, sample
from backend.workers import registry
from backend.workers.grpc_client import AgentColumns, WorkerClient
from backend.workers.plane_errors import WorkerPlaneError
from worker_server.labels import format_labels
from worker_server.worker_states import REMOVED, is_live

log = logging.getLogger(__name__)

REPAIRABLE = lifecycle.PLAYABLE
# GetInfo is cheap; a worker that does not answer this fast is treated as not hosting for now.
INFO_TIMEOUT_S = 3.0
# Agent ids per DeleteAgents call (8 bytes each: well inside gRPC's 4 MiB message limit).
DELETE_IDS_PER_CALL = 100_000
# Samples kept for rebuilding agents: one per population being repaired is enough.
SAMPLE_CACHE = 4


@dataclass
class RepairReport:
    population_id: int
    size: int
    hosted: int
    restored: int = 0
    replaced: int = 0
    unplaced: int = 0
    status: str = ""
    # Seconds spent per step (reading the store, moving rows, rebuilding agents, creating them
    # on workers), for the event and the log: where a big repair's time goes.
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def whole(self) -> bool:
        return self.hosted >= self.size

    def as_dict(self) -> dict:
        return {
            "population_id": self.population_id,
            "size": self.size,
            "hosted": self.hosted,
            "restored": self.restored,
            "replaced": self.replaced,
            "unplaced": self.unplaced,
            "status": self.status,
            "timings": {name: round(seconds, 3) for name, seconds in self.timings.items()},
        }


class PlacementKeeper:
    def __init__(
        self,
        sessionmaker: async_sessionmaker,
        hub: EventHub,
        *,
        replace_after_s: float,
        interval_s: float,
        full_check_s: float = 10.0,
    ) -> None:
        self.sessionmaker = sessionmaker
        self.hub = hub
        self.replace_after_s = replace_after_s
        self.interval_s = interval_s
        # Every deployed population is checked this often, so agents removed from a live
        # worker behind the manager's back (a direct DeleteAgents) are restored too.
        self.full_check_s = full_check_s
        self._commits: dict[int, asyncio.Future] = {}
        self._last_full_check = 0.0
        self._locks: defaultdict[int, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._wake = asyncio.Event()
        self._samples: OrderedDict[int, SampledPopulation] = OrderedDict()
        # Moves on every restore or re-placement, so runs know when to read their hosts again.
        self.placement_version = 0
        self._check_workers: set[int] = set()

    # --- the background pass -------------------------------------------------------------

    def worker_registered_again(self, worker_id: int) -> None:
        """A restarted process took its row back: check (and restore) what it hosts now."""
        self._check_workers.add(worker_id)
        self._wake.set()

    def poke(self) -> None:
        self._wake.set()

    async def run_forever(self) -> None:
        while True:
            try:
                await self.pass_once()
            except Exception as exc:  # a transient DB or worker error must not end the keeper
                stop_if_cancelled(exc)  # unless it stands for a cancellation
                log.exception("placement keeper pass failed; retrying")
            stop_if_cancelled()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval_s)
            self._wake.clear()

    async def pass_once(self) -> list[RepairReport]:
        """Repair every population that needs it and is not in the middle of a round."""
        reports = []
        for population_id in await self._needing_repair():
            if self._locks[population_id].locked():
                # A round is playing (an LLM round may take minutes), or a repair is running:
                # the round repairs what it misses itself; waiting here would stall every other
                # population's repairs behind it.
                continue
            report = await self.repair(population_id)
            if report is not None:
                reports.append(report)
        return reports

    async def _needing_repair(self) -> list[int]:
        """Degraded populations, those with agents on gone workers (removed, or offline past
        the grace period) or on workers that registered again, and now and then all.

        Every lookup of agents is an index probe (worker, id range), never a scan: this runs
        every second beside rounds of 10^6 agents."""
        cutoff = utcnow() - timedelta(seconds=self.replace_after_s)
        checked, self._check_workers = self._check_workers, set()
        full = time.monotonic() - self._last_full_check >= self.full_check_s
        if full:
            self._last_full_check = time.monotonic()
        async with self.sessionmaker() as session:
            repairable = await store.statuses(session, REPAIRABLE)
            if not repairable:
                return []
            candidates = {
                pid for pid, status in repairable.items() if full or status == lifecycle.DEGRADED
            }
            gone = await registry.gone_hosting(session, offline_before=cutoff)
            suspects = [*gone, *checked]
            for population_id in sorted(set(repairable) - candidates) if suspects else []:
                if await store.has_agents_on(session, population_id, suspects):
                    candidates.add(population_id)
        return sorted(candidates)

    # --- one population ------------------------------------------------------------------

    def committing(self, population_id: int, commit: asyncio.Future) -> None:
        """A round of the population's run being stored while the next one plays: agents moved
        before it lands would get their memory without it, so moves wait for it."""
        self._commits[population_id] = commit

    async def _commit_landed(self, population_id: int) -> None:
        commit = self._commits.get(population_id)
        if commit is None:
            return
        if not commit.done():
            await asyncio.wait({commit})  # its outcome is the run's to handle, not ours
        if self._commits.get(population_id) is commit:
            del self._commits[population_id]

    def hold(self, population_id: int) -> asyncio.Lock:
        """The population's lock, for a round that must not see agents arrive mid-round."""
        return self._locks[population_id]

    async def repair(
        self, population_id: int, *, replace_offline: bool = False
    ) -> RepairReport | None:
        """Bring the population back to whole where workers allow; None when it is not
        deployed or degraded. replace_offline: re-place an offline worker's agents now, without
        waiting for the grace period (a round is waiting for them). Counting the agents per
        worker reads the placement's ranges (a handful of rows), so the background pass may do
        it every few seconds."""
        async with self._locks[population_id]:
            return await self._repair(population_id, replace_offline)

    async def move_off(self, population_id: int, worker_id: int) -> tuple[int, int]:
        """Move the population's agents placed on one worker to others (emptying it);
        returns (moved, left unplaced)."""
        async with self._locks[population_id]:
            async with self.sessionmaker() as session:
                population = await store.get_population(session, population_id)
            self.placement_version += 1
            moved, unplaced = await self._replace(population, [worker_id])
            await self._repair(population_id, replace_offline=False)
            return moved, unplaced

    async def _repair(self, population_id: int, replace_offline: bool) -> RepairReport | None:
        async with self.sessionmaker() as session:
            try:
                population = await store.get_population(session, population_id)
            except store.UnknownPopulation:
                return None
            if population.status not in REPAIRABLE:
                return None
            per_worker = await store.agents_per_worker(session, population_id)
            placed = [w for w in per_worker if w is not None]
            workers = await registry.by_ids(session, placed)
        report = RepairReport(population_id, population.size, hosted=0)
        to_restore, to_move = await self._triage(
            population_id, per_worker, workers, replace_offline, report
        )
        if to_restore or to_move:
            self.placement_version += 1
        for worker in to_restore:
            restored = await self._restore(population, worker, report.timings)
            report.restored += restored
            report.hosted += restored
        if to_move:
            replaced, unplaced = await self._replace(population, to_move, report.timings)
            report.replaced += replaced
            report.unplaced += unplaced
            report.hosted += replaced

        placement = placement_of(population)
        reason = {}
        if placement.dedicated_process:  # why it is degraded, or None once it is whole again
            reason["reason"] = _no_free_process(report.unplaced, placement) or None
        async with self.sessionmaker() as session:
            updated = await store.set_hosted(session, population_id, report.hosted, **reason)
        report.status = updated.status if updated is not None else population.status
        if report.restored or report.replaced or population.hosted != report.hosted:
            self.hub.publish(
                PopulationProgress(
                    stage="repaired", done=report.hosted, total=population.size, **report.as_dict()
                )
            )
            log.info("population %s repaired: %s", population_id, report.as_dict())
        return report

    async def _triage(
        self,
        population_id: int,
        per_worker: dict[int | None, int],
        workers: dict[int, Worker],
        replace_offline: bool,
        report: RepairReport,
    ) -> tuple[list[Worker], list[int | None]]:
        """(live workers to restore their share on, workers whose agents move elsewhere);
        the agents live workers still host whole are counted hosted in `report`."""
        cutoff = utcnow() - timedelta(seconds=self.replace_after_s)
        live = [w for w in workers.values() if is_live(w.state)]
        # One GetInfo per live host, all at once: a cluster of many workers is asked in parallel.
        answers = await asyncio.gather(*(self._hosting(w.address, population_id) for w in live))
        hosting_now = {w.id: n for w, n in zip(live, answers, strict=True)}
        to_restore: list[Worker] = []
        to_move: list[int | None] = []
        for worker_id, count in per_worker.items():
            worker = workers.get(worker_id) if worker_id is not None else None
            if worker_id is None or worker is None or worker.state == REMOVED:
                to_move.append(worker_id)
            elif is_live(worker.state):
                hosting = hosting_now[worker.id]
                if hosting == count:
                    report.hosted += count
                elif hosting is not None:
                    to_restore.append(worker)
                # No answer: it may be restarting; the TTL will tell, and a repair after it.
            elif replace_offline or worker.last_heartbeat < cutoff:
                to_move.append(worker_id)
        return to_restore, to_move

    async def _hosting(self, address: str, population_id: int) -> int | None:
        try:
            async with WorkerClient(address) as client:
                info = await client.info(timeout=INFO_TIMEOUT_S)
        except WorkerPlaneError:
            return None
        return int(info.population_agents.get(str(population_id), 0))

    async def _restore(
        self, population: Population, worker: Worker, timings: dict[str, float]
    ) -> int:
        """Create the worker's share of the population on it again, from the store."""
        with _timed(timings, "read_ids_s"):
            async with self.sessionmaker() as session:
                ids = await store.agent_ids_on(session, population.id, [worker.id])
        try:
            columns = await self._columns(population, ids, timings)
            with _timed(timings, "create_s"):
                async with WorkerClient(worker.address) as client:
                    await client.delete_agents(population_id=str(population.id), timeout=60)
                    await client.create_agents(columns, batch_size=STREAM_BATCH)
        except WorkerPlaneError as exc:
            log.warning(
                "could not restore %d agents of population %s on worker %s: %s",
                len(ids),
                population.id,
                worker.id,
                exc.message,
            )
            return 0
        log.info(
            "restored %d agents of population %s on worker %s", len(ids), population.id, worker.id
        )
        self._progress(population, "restored", len(ids), len(ids), worker_id=worker.id)
        return len(ids)

    def _progress(
        self, population: Population, stage: PopulationStage, done: int, total: int, **extra
    ) -> None:
        """Like a deploy's: the dashboard and the CLI show a repair as it goes."""
        self.hub.publish(
            PopulationProgress(
                population_id=population.id, stage=stage, done=done, total=total, **extra
            )
        )

    async def _replace(
        self,
        population: Population,
        from_workers: list[int | None],
        timings: dict[str, float] | None = None,
    ) -> tuple[int, int]:
        """Move the agents of these workers (None: unplaced) onto online workers with room
        that the population's placement admits; returns (placed, left unplaced)."""
        timings = {} if timings is None else timings
        placement = placement_of(population)
        async with self.sessionmaker() as session:
            with _timed(timings, "read_ids_s"):
                ids = await store.agent_ids_on(session, population.id, from_workers)
            if placement.dedicated_process:
                free = await free_processes(session, placement, excluding=from_workers)
                shares = [(slot, 1) for slot in free[: len(ids)]]
            else:
                shares = await _shares_with_room(session, len(ids), placement, from_workers)
        placed, start = 0, 0
        for slot, n in shares:
            part = ids[start : start + n]
            start += n
            with _timed(timings, "move_placement_s"):
                async with self.sessionmaker() as session:
                    await store.move_agents(
                        session, population.id, part, from_workers, slot.worker_id
                    )
            try:
                columns = await self._columns(population, part, timings)
                with _timed(timings, "create_s"):
                    async with WorkerClient(slot.address) as client:
                        # A worker back from a stall (marked offline, its agents unplaced) may
                        # still hold some of them: dropped there first, the store's copy wins.
                        for begin in range(0, len(part), DELETE_IDS_PER_CALL):
                            chunk = part[begin : begin + DELETE_IDS_PER_CALL]
                            await client.delete_agents(ids=chunk.tolist(), timeout=60)
                        await client.create_agents(columns, batch_size=STREAM_BATCH)
            except WorkerPlaneError as exc:
                log.warning(
                    "worker %s refused %d re-placed agents of population %s: %s",
                    slot.worker_id,
                    n,
                    population.id,
                    exc.message,
                )
                async with self.sessionmaker() as session:  # placed nowhere: the next pass retries
                    await store.move_agents(session, population.id, part, [slot.worker_id], None)
                continue
            placed += n
            self._progress(population, "replacing", placed, len(ids))
        unplaced = len(ids) - placed
        if unplaced:
            async with self.sessionmaker() as session:
                rest = await store.agent_ids_on(session, population.id, from_workers)
                await store.move_agents(
                    session, population.id, rest, [w for w in from_workers if w is not None], None
                )
        return placed, unplaced

    async def _columns(
        self, population: Population, ids: np.ndarray, timings: dict[str, float]
    ) -> AgentColumns:
        """The agents `ids` (sorted) rebuilt from the store, as deploy sent them."""
        with _timed(timings, "sample_s"):
            sampled = await self._sample(population)
        index = ids & np.int64(0xFFFFFFFF)
        # Before the session starts: SQLite reads from the snapshot of its first statement.
        with _timed(timings, "wait_commit_s"):
            await self._commit_landed(population.id)
        async with self.sessionmaker() as session:
            with _timed(timings, "read_personas_s"):
                personas = await self._personas(session, population, sampled, ids, index)
            with _timed(timings, "read_memory_s"):
                memory = await agent_memory.load(session, population.id, ids)
        graph = None
        graph_file = population_graph.file_of(population)
        if graph_file is not None:
            with _timed(timings, "read_graph_s"):
                # The file is the one source of truth: re-placed agents get their rows from it.
                graph = await asyncio.to_thread(population_graph.rows_of, graph_file, ids)
        columns = AgentColumns(
            population_id=str(population.id),
            ids=ids,
            codes={name: codes[index] for name, codes in sampled.codes.items()},
            categories=dict(sampled.categories),
            personas=personas,
            memory=memory,
            graph=graph,
        )
        return columns

    async def _personas(
        self,
        session: AsyncSession,
        population: Population,
        sampled: SampledPopulation,
        ids: np.ndarray,
        index: np.ndarray,
    ) -> list[str]:
        """The agents' personas as deploy made them: a template's rendered again from the
        seeded sample (what deploy stored, without reading it back); LLM-written ones read
        from the store, as only the store has them."""
        persona = PopulationConfig.model_validate(population.config).persona
        if persona is None:
            return [""] * len(ids)
        if persona.mode == "template":
            return await asyncio.to_thread(render_template, persona.template, sampled, index)
        return await store.personas_of(session, ids)

    async def _sample(self, population: Population) -> SampledPopulation:
        cached = self._samples.get(population.id)
        if cached is None:
            config = PopulationConfig.model_validate(population.config)
            cached = await asyncio.to_thread(sample, config)
            await _with_node_attributes(population, config, cached)
            self._samples[population.id] = cached
            while len(self._samples) > SAMPLE_CACHE:
                self._samples.popitem(last=False)
        self._samples.move_to_end(population.id)
        return cached


async def _with_node_attributes(
    population: Population, config: PopulationConfig, sampled: SampledPopulation
) -> None:
    """Agents of a population whose graph came with a node table get its attributes back:
    the table is read again from the uploads beside the graph file (data_dir/uploads)."""
    spec = config.graph
    graph_file = population_graph.file_of(population)
    if getattr(spec, "nodes", None) is None or graph_file is None:
        return
    data_dir = graph_file.parent.parent  # data_dir/graphs/population-N.graph
    try:
        built = await asyncio.to_thread(population_graph.build, config, data_dir)
    except population_graph.GraphInvalid as exc:
        log.warning(
            "population %s: its node table cannot be read again (%s); re-placed agents come "
            "without its attributes",
            population.id,
            exc.message,
        )
        return
    add_node_attributes(sampled, built)


@contextlib.contextmanager
def _timed(timings: dict[str, float], name: str) -> Iterator[None]:
    started = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = timings.get(name, 0.0) + time.perf_counter() - started


async def _shares_with_room(
    session, n: int, placement: PlacementConfig, from_workers: list[int | None]
) -> list[tuple[Slot, int]]:
    """Shares of n agents on the workers with room (not from_workers), as many as fit."""
    slots = [s for s in await free_slots(session, placement) if s.worker_id not in from_workers]
    # Heartbeats report a worker's agents a second late: what the store already placed there
    # counts too, so a worker is never asked for more than fits.
    placed = await store.agents_on_workers(session, [s.worker_id for s in slots])
    slots = [
        replace(s, free=max(0, min(s.free, s.capacity - placed.get(s.worker_id, 0)))) for s in slots
    ]
    return _fill(n, slots, placement.spread)


def _no_free_process(unplaced: int, placement: PlacementConfig) -> str:
    """Why a dedicated population's agents wait unplaced ('' when none do)."""
    if not unplaced:
        return ""
    where = f" labelled {format_labels(placement.node_selector)}" if placement.node_selector else ""
    return (
        f"placement.dedicated_process: {unplaced} agent(s) wait for a worker process of their "
        f"own, and no online worker process{where} is free (each hosts other agents): start "
        "workers with more --procs or on more nodes; they are placed as soon as one is free"
    )


def _fill(n: int, slots: list[Slot], spread: str) -> list[tuple[Slot, int]]:
    """Shares of n agents by the population's spread, as many as fit (the rest stay unplaced)."""
    room = sum(s.free for s in slots)
    return place(min(n, room), slots, spread) if room else []


def placement_of(population: Population) -> PlacementConfig:
    """The placement a population was deployed with (populations from before it: the default)."""
    return PlacementConfig.model_validate((population.config or {}).get("placement") or {})
