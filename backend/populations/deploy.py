"""The deploy pipeline: config -> sampled attributes (and graph) -> placement -> personas ->
rows -> workers.

Runs as a background task after POST /api/populations answered 202; each stage reports a
`population.progress` event. Any failure removes whatever was already created (agents on workers
and rows in the store, and the graph file) and leaves the population `failed` with the reason:
never half-deployed.

A population with a graph gets it built in a thread (generated, or parsed from its upload),
written to its file, described in `populations.graph` (with the cut fraction of the placement's
contiguous ranges), and each worker gets its agents' rows with the agents.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import psutil

from backend.errors import Conflict
from backend.events.catalog import PopulationProgress, PopulationStage
from backend.events.hub import EventHub
from backend.graphs.files import delete_graph
from backend.lifecycles import deploy as stages
from backend.lifecycles import population as lifecycle
from backend.populations import dedicated, store
from backend.populations import graph as population_graph
from backend.populations.config import PlacementConfig, PopulationConfig
from backend.populations.personas import PersonaShare, generate_llm_personas, render_template
from backend.populations.placement import Slot, eligible, is_free_process, place, place_dedicated
from backend.populations.sampling import SampledPopulation, sample
from backend.workers import registry
from backend.workers.grpc_client import AgentColumns, WorkerClient
from backend.workers.plane_errors import WorkerPlaneError

log = logging.getLogger(__name__)

# Rows per INSERT/COPY chunk and agents per CreateAgents message.
PERSIST_CHUNK = 50_000
STREAM_BATCH = 50_000
# What workers budget per agent by default (worker_server.settings.bytes_per_agent_budget): a
# graph's rows must fit in the room the free capacity stands for, beside the agents themselves.
WORKER_BYTES_PER_AGENT = 2048
# Generating or parsing a graph holds a few copies of its edges at once on the manager.
GRAPH_BUILD_FACTOR = 4


class GraphTooLarge(Conflict):
    """The graph would not fit the cluster's (or the manager's) memory."""


async def online_slots(session, placement: PlacementConfig | None = None) -> list[Slot]:
    """Online, non-draining workers (those the placement's node selector admits) and how many
    more agents each can take, nodes taking turns (see placement.eligible)."""
    slots = [
        Slot(wid, address, max(0, cap - agents), cap, node, labels or {})
        for wid, address, cap, agents, node, labels in await registry.placing_workers(session)
    ]
    return eligible(slots, placement.node_selector if placement else {})


async def free_slots(session, placement: PlacementConfig | None = None) -> list[Slot]:
    """online_slots but those dedicated populations hold (many agents per process)."""
    held = await dedicated.held_workers(session)
    return [s for s in await online_slots(session, placement) if s.worker_id not in held]


async def free_processes(
    session, placement: PlacementConfig, excluding: Sequence[int | None] = ()
) -> list[Slot]:
    """The online processes the placement admits that host nothing (a process per agent)."""
    slots = [s for s in await online_slots(session, placement) if s.worker_id not in excluding]
    taken = await _taken(session, slots)
    return [s for s in slots if is_free_process(s, taken)]


async def _taken(session, slots: Sequence[Slot]) -> set[int]:
    return await dedicated.taken_workers(session, [s.worker_id for s in slots])


async def plan_placement(session, config: PopulationConfig) -> list[tuple[Slot, int]]:
    """Where a new population's agents go, (slot, count) pairs; NotEnoughCapacity or
    NotEnoughProcesses (409, naming the numbers) when the cluster has too little room."""
    placement = config.placement
    if placement.dedicated_process:
        slots = await online_slots(session, placement)
        taken = await _taken(session, slots)
        return place_dedicated(config.size, slots, taken, placement.node_selector)
    return place(
        config.size,
        await free_slots(session, placement),
        placement.spread,
        placement.node_selector,
    )


def check_graph_room(config: PopulationConfig, slots: Sequence[tuple[Slot, int]]) -> None:
    """Refuse (GraphTooLarge, 409) a graph whose estimated size does not fit: on the workers
    placed (their free room beyond the agents, at the default per-agent budget) or on the
    manager, which builds it."""
    needed = population_graph.estimated_bytes(config)
    if not needed:
        return
    mib = 2**20
    free_agents = sum(slot.free for slot, _ in slots)
    room = max(0, free_agents - config.size) * WORKER_BYTES_PER_AGENT
    if needed > room:
        raise GraphTooLarge(
            f"the graph needs about {needed / mib:,.0f} MiB on the workers (estimated from "
            f"stored_bytes for {config.size:,} agents), but the placed workers have room for "
            f"about {room / mib:,.0f} MiB beside the agents ({free_agents:,} free agent slots at "
            f"{WORKER_BYTES_PER_AGENT} B each): add workers or lower the graph's degree"
        )
    available = psutil.virtual_memory().available
    if GRAPH_BUILD_FACTOR * needed > available:
        raise GraphTooLarge(
            f"building the graph takes about {GRAPH_BUILD_FACTOR * needed / mib:,.0f} MiB on "
            f"the manager ({needed / mib:,.0f} MiB stored), and it has "
            f"{available / mib:,.0f} MiB available"
        )


def _attribute_columns(sampled: SampledPopulation) -> dict[str, np.ndarray]:
    """Category strings per attribute (and numeric bin values), as columns for the store."""
    columns = {
        name: np.asarray(sampled.categories[name], dtype=object)[codes]
        for name, codes in sampled.codes.items()
    }
    for name, values in sampled.values.items():
        columns[f"{name}_value"] = values
    return columns


class DeployFailed(RuntimeError):
    """A stage of the deploy failed; the message names what and where."""


class Deployment:
    def __init__(
        self,
        sessionmaker,
        hub: EventHub,
        population_id: int,
        config: PopulationConfig,
        data_dir: Path | None = None,
    ):
        self.sessionmaker = sessionmaker
        self.hub = hub
        self.population_id = population_id
        self.config = config
        # Where graph files and uploads live; needed only for a population with a graph.
        self.data_dir = data_dir
        self.built: population_graph.BuiltGraph | None = None
        self.placed: list[tuple[Slot, int]] = []
        self.created_on: list[Slot] = []
        self.timings: dict[str, float] = {}
        # The last stage reported (the deploy's table says which may follow it).
        self.stage: str | None = None

    def progress(self, stage: PopulationStage, done: int, total: int, **extra) -> None:
        if self.stage is not None:
            stages.check_transition(self.stage, stage)
        self.stage = stage
        self.hub.publish(
            PopulationProgress(
                population_id=self.population_id, stage=stage, done=done, total=total, **extra
            )
        )

    async def run(self) -> None:
        try:
            await self._run()
        except asyncio.CancelledError:
            await self._undo("the manager stopped during the deploy")
            raise
        except Exception as exc:
            log.exception("deploy of population %s failed", self.population_id)
            await self._undo(
                str(exc) if isinstance(exc, DeployFailed) else f"{type(exc).__name__}: {exc}"
            )
        finally:
            dedicated.release(self.population_id)

    def _timed(self, name: str, started: float) -> None:
        self.timings[name] = round(time.perf_counter() - started, 3)

    async def _run(self) -> None:
        config, size = self.config, self.config.size
        t = time.perf_counter()
        sampled = await asyncio.to_thread(sample, config)
        self._timed("sample_s", t)
        self.progress(stages.SAMPLED, size, size)
        if config.graph is not None:
            t = time.perf_counter()
            if self.data_dir is None:
                raise DeployFailed("this deploy has no data directory for the graph file")
            try:
                self.built = await asyncio.to_thread(population_graph.build, config, self.data_dir)
            except population_graph.GraphInvalid as exc:
                raise DeployFailed(f"{'.'.join(map(str, exc.loc))}: {exc.message}") from None
            add_node_attributes(sampled, self.built)
            self._timed("graph_s", t)
            self.progress(stages.GRAPH, size, size)

        # Placement comes before personas: LLM personas are written by the workers, each for
        # the agents it will host.
        t = time.perf_counter()
        async with self.sessionmaker() as session:
            self.placed = await plan_placement(session, config)
        # Until the rows are stored, only this claim keeps other deploys off these workers.
        dedicated.claim(
            self.population_id,
            config.placement.dedicated_process,
            (slot.worker_id for slot, _ in self.placed),
        )
        self._timed("place_s", t)
        if self.built is not None:
            t = time.perf_counter()
            await self._save_graph()
            self._timed("graph_save_s", t)

        t = time.perf_counter()
        personas, persona_failures = await self._personas(sampled)
        self._timed("persona_s", t)
        self.progress(stages.PERSONAS, size, size, failures=persona_failures)

        t = time.perf_counter()
        worker_ids = np.concatenate(
            [np.full(n, slot.worker_id, dtype=np.int64) for slot, n in self.placed]
        )
        attributes = _attribute_columns(sampled)
        for start in range(0, size, PERSIST_CHUNK):
            stop = min(size, start + PERSIST_CHUNK)
            chunk = {name: column[start:stop] for name, column in attributes.items()}
            async with self.sessionmaker() as session:
                await store.bulk_insert_agents(
                    session,
                    self.population_id,
                    start,
                    chunk,
                    personas[start:stop],
                    worker_ids[start:stop],
                )
            self.progress(stages.PERSISTED, stop, size)
        dedicated.release(self.population_id)  # the store places them now
        async with self.sessionmaker() as session:
            await store.analyze_agents(session)
        self._timed("persist_s", t)

        t = time.perf_counter()
        await self._create_on_workers(sampled, personas)
        self._timed("create_s", t)

        async with self.sessionmaker() as session:
            await store.set_status(
                session,
                self.population_id,
                lifecycle.DEPLOYED,
                counts=sampled.counts,
                hosted=size,
            )
            await session.commit()
        self.progress(stages.DEPLOYED, size, size, timings=self.timings)

    async def _save_graph(self) -> None:
        """Describe the graph, write its file and store the description with the file's path."""
        counts = [n for _, n in self.placed]
        bounds = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
        built, config, data_dir = self.built, self.config, self.data_dir

        def describe_and_write() -> dict:
            record = population_graph.stats(built.graph, config, bounds)
            path = population_graph.save(data_dir, self.population_id, built, config, record)
            return {**record, "file": str(path.resolve()) if path is not None else None}

        record = await asyncio.to_thread(describe_and_write)
        async with self.sessionmaker() as session:
            await store.set_graph(session, self.population_id, record)
        self.progress(stages.GRAPH_SAVED, self.config.size, self.config.size)

    async def _personas(self, sampled: SampledPopulation) -> tuple[list[str], int]:
        rows = np.arange(self.config.size)
        persona = self.config.persona
        if persona is None:  # agents without personas (rule-based simulations)
            return [""] * self.config.size, 0
        if persona.mode == "llm":
            shares, start = [], 0
            for slot, n in self.placed:
                shares.append(PersonaShare(slot.address, start, n))
                start += n
            try:
                return await generate_llm_personas(
                    persona,
                    sampled,
                    shares,
                    on_progress=lambda done, total: self.progress(stages.PERSONAS, done, total),
                )
            except* WorkerPlaneError as failures:
                exc = failures.exceptions[0]
                raise DeployFailed(
                    f"a worker could not write personas: {exc.status}: {exc.message}"
                ) from None
        return await asyncio.to_thread(render_template, persona.template, sampled, rows), 0

    async def _create_on_workers(self, sampled: SampledPopulation, personas: Sequence[str]) -> None:
        ids = (np.int64(self.population_id) << 32) | np.arange(self.config.size, dtype=np.int64)
        columns = AgentColumns(
            population_id=str(self.population_id),
            ids=ids,
            codes=dict(sampled.codes),
            categories=dict(sampled.categories),
            personas=list(personas),
            graph=self.built.graph if self.built is not None else None,
        )
        start, done = 0, 0

        async def one(slot: Slot, share: AgentColumns) -> None:
            nonlocal done
            try:
                async with WorkerClient(slot.address) as client:
                    await client.create_agents(share, batch_size=STREAM_BATCH)
            except WorkerPlaneError as exc:
                raise DeployFailed(
                    f"worker {slot.worker_id} at {slot.address} refused its {len(share)} agents: "
                    f"{exc.status}: {exc.message}"
                ) from exc
            self.created_on.append(slot)
            done += len(share)
            self.progress(stages.CREATED, done, self.config.size)

        try:
            async with asyncio.TaskGroup() as group:
                for slot, n in self.placed:
                    group.create_task(one(slot, columns.take(slice(start, start + n))))
                    start += n
        except* DeployFailed as failures:
            # One clear reason (the first worker's) rather than an exception group.
            raise failures.exceptions[0] from None

    async def _undo(self, reason: str) -> None:
        """Leave nothing behind: agents off the workers, rows out of the store, status failed."""
        for slot, _ in self.placed:
            try:
                async with WorkerClient(slot.address) as client:
                    await client.delete_agents(population_id=str(self.population_id))
            except Exception as exc:  # an unreachable worker is reconciled by the reaper later
                log.warning(
                    "could not remove population %s from %s: %s",
                    self.population_id,
                    slot.address,
                    exc,
                )
        if self.data_dir is not None:
            await asyncio.to_thread(delete_graph, self.data_dir, self.population_id)
        async with self.sessionmaker() as session:
            await store.set_graph(session, self.population_id, None)
            await store.delete_population_rows(
                session, self.population_id, final_status=lifecycle.FAILED, error=reason
            )
            await session.commit()
        self.progress(stages.FAILED, 0, self.config.size, error=reason)


def add_node_attributes(sampled: SampledPopulation, built: population_graph.BuiltGraph) -> None:
    """An uploaded node table's columns join the sampled attributes (agent order)."""
    for name, (categories, codes) in built.attributes.items():
        sampled.codes[name] = codes.astype(np.uint32)
        sampled.categories[name] = categories
