"""A simulation's life on the manager: pending -> running -> completed | failed | cancelled, and
running <-> paused.

`SimulationRun` wires the global environment to its listeners, the store and the placement
keeper, turns every way a run can end into a status with a clear reason, and publishes
`simulation.updated` on each change. A run can start at round 1 or resume after the last
committed round (a pause, a failure, a manager restart). `RunningSimulations` is this manager
process's table of runs in flight (for pause and cancel).

A manager that stops (SIGTERM, or SIGKILL) leaves its runs `running` in the store: the next
start resumes them (backend.reconcile).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.cancellation import stop_if_cancelled
from backend.db.models import Simulation
from backend.db.times import utc_iso
from backend.events.catalog import SimulationFault, SimulationUpdated
from backend.events.hub import EventHub
from backend.graphs.files import graph_path
from backend.lifecycles import population as population_lifecycle
from backend.lifecycles import simulation as lifecycle
from backend.populations import store as population_store
from backend.populations.keeper import PlacementKeeper
from backend.simulations import carried, group_store, store
from backend.simulations.attribute_groups import attribute_groups
from backend.simulations.environment import (
    FaultPolicy,
    GlobalEnvironment,
    SimulationCancelled,
    SimulationFailed,
    SimulationPaused,
    Told,
    feedback_of,
)
from backend.simulations.listeners import (
    PersistRounds,
    PopulationStillDeployed,
    PublishRoundEvents,
)
from backend.simulations.metrics_declared import MetricValue, declared_metrics, metric_values
from backend.simulations.mixture import agent_parts
from backend.simulations.network import (
    NetworkMemory,
    NetworkPlacement,
    group_labels,
    network_placement,
)
from backend.simulations.outcome import resolve
from backend.simulations.record import KeepRecord
from backend.simulations.spec import GameSpec
from backend.simulations.store_retry import (
    FOREVER,
    is_store_outage,
    retry_store,
    unavailable_reason,
)
from backend.simulations.timeline import FaultLog
from backend.workers import registry
from populace.registry import installed
from worker_server.graphs.storage import GraphFileError

log = logging.getLogger(__name__)
# How often a round checks that the workers it waits for are still live.
GONE_POLL_S = 1.0


async def live_hosts(session: AsyncSession, population_id: int) -> list[str]:
    """Addresses of the live workers the store places the population's agents on."""
    return sorted(await live_spans(session, population_id))


async def live_spans(session: AsyncSession, population_id: int) -> dict[str, tuple[int, int]]:
    """{address: (lowest, highest) agent number} of the live workers the store places the
    population's agents on."""
    spans = await population_store.agent_spans(session, population_id)
    if not spans:
        return {}
    live = dict(await registry.live_workers(session))
    return {live[w]: span for w, span in sorted(spans.items()) if w in live}


def simulation_updated(simulation: Simulation) -> SimulationUpdated:
    return SimulationUpdated(
        simulation_id=simulation.id,
        population_id=simulation.population_id,
        status=simulation.status,
        rounds=simulation.rounds,
        current_round=simulation.current_round,
        error=simulation.error,
        stop_reason=simulation.stop_reason,
        pause_reason=simulation.pause_reason,
        cancel_reason=simulation.cancel_reason,
        lost_agents=simulation.lost_agents,
        rounds_below_floor=simulation.rounds_below_floor,
        # So a page that follows the run shows when it started and ended without a reload.
        started_at=_iso(simulation.started_at),
        finished_at=_iso(simulation.finished_at),
    )


def publish_simulation(hub: EventHub, simulation: Simulation) -> None:
    hub.publish(simulation_updated(simulation))


def _iso(value) -> str | None:
    return None if value is None else utc_iso(value)


@dataclass
class ResumePoint:
    """What a run needs to go on after its last committed round."""

    played: int = 0
    # What agents were told after the kept rounds, and what each group heard after the last.
    told: list[Told] = field(default_factory=list)
    groups: dict[str, np.ndarray] = field(default_factory=dict)
    # Every kept round's metrics, oldest first (the stop rules read them).
    metrics: list[dict[str, MetricValue]] = field(default_factory=list)
    # The last kept round's group metrics (the next round's resolve reads them).
    group_metrics: dict[str, np.ndarray] = field(default_factory=dict)


async def resume_point(session: AsyncSession, simulation_id: int, spec: GameSpec) -> ResumePoint:
    """The kept rounds, read back: their metrics, and what the plugin makes of them
    (PluginFailed when it cannot). A simulation played in groups resolves its last kept round
    again, from the stored decisions, for what the groups heard (resolve is pure)."""
    rows = await store.all_rounds(session, simulation_id)
    point = ResumePoint(played=rows[-1].round if rows else 0)
    simulation = installed().get(spec.plugin).simulation
    declared = declared_metrics(spec.plugin)
    for row in rows:
        metrics = metric_values(declared, row.metrics or {})
        point.metrics.append(metrics)
        told = feedback_of(spec.plugin, simulation, spec.params, row.round, metrics)
        if told is not None:
            point.told.append(told)
    if rows and type(simulation).group_metrics:
        point.group_metrics = await group_store.load(session, simulation_id, point.played)
    if rows and spec.plugin_version is not None and simulation.group_size(spec.params):
        actions = await store.kept_actions(session, simulation_id, point.played)
        # The same inputs as when the round was played: the round before's group metrics.
        before = await group_store.load(session, simulation_id, point.played - 1)
        actions = replace(actions, previous_group_metrics=before)
        point.groups = resolve(spec.plugin, simulation, spec.params, actions).groups
    return point


@dataclass
class SimulationRun:
    sessionmaker: async_sessionmaker
    hub: EventHub
    spec: GameSpec
    population_size: int
    keeper: PlacementKeeper | None = None
    faults: FaultPolicy = field(default_factory=FaultPolicy)
    resume: ResumePoint = field(default_factory=ResumePoint)
    env: GlobalEnvironment | None = None
    task: asyncio.Task | None = None
    cancel_requested: bool = False
    pause_reason: str | None = None
    _hosts_cache: tuple[int | None, dict[str, tuple[int, int]]] | None = None
    _hosts_stale: bool = False
    # Where the population's graph file is (a network simulation reads its groups there).
    data_dir: Path | None = None
    # The population's graph is complete: no file, one group, workers keep every value.
    complete_graph: bool = False
    _network_cache: tuple[int | None, NetworkPlacement] | None = None
    _network_stale: bool = False
    _live: tuple[float, set[str]] = (float("-inf"), set())
    _live_read: asyncio.Task | None = None
    # The run's faults, on its timeline (made at the first).
    _faults: FaultLog | None = None
    # How long a store call of the round loop is tried again through a database outage.
    store_retry_s: float = 60.0
    # The outage being ridden out was told on the timeline (once per outage, not per call).
    _outage_told: bool = False

    @property
    def simulation_id(self) -> int:
        return self.spec.simulation_id

    async def _store(self, what: str, call, window_s: float | None = None):
        """A store call of the run, tried again through a database outage (store_retry)."""
        result = await retry_store(
            call,
            window_s=self.store_retry_s if window_s is None else window_s,
            what=f"simulation {self.simulation_id}: {what}",
            on_outage=self._tell_outage,
        )
        self._outage_told = False
        return result

    def _tell_outage(self) -> None:
        if self._outage_told:
            return
        self._outage_told = True
        round_number = self.env.round if self.env is not None else 0
        self._fault(
            round_number,
            f"the database is unreachable; retrying for up to {self.store_retry_s:g} s",
        )

    async def _set(self, status: str, *, window_s: float | None = None, **fields) -> None:
        async def write():
            async with self.sessionmaker() as session:
                return await store.set_status(session, self.simulation_id, status, **fields)

        simulation = await self._store(f"set status {status}", write, window_s)
        if simulation is not None:
            publish_simulation(self.hub, simulation)

    async def _hosts(self) -> list[str]:
        return sorted(await self._spans())

    async def _spans(self) -> dict[str, tuple[int, int]]:
        """The live hosts and the agent numbers each spans, read again only when placement may
        have changed: reading a 10^6-agent population per worker is a good part of a second on
        the round's critical path."""
        version = self.keeper.placement_version if self.keeper is not None else None
        if self._hosts_cache is None or version != self._hosts_cache[0] or self._hosts_stale:

            async def read():
                async with self.sessionmaker() as session:
                    return await live_spans(session, self.spec.population_id)

            hosts = await self._store("read the population's hosts", read)
            self._hosts_cache, self._hosts_stale = (version, hosts), False
        return self._hosts_cache[1]

    async def _network(self) -> NetworkPlacement:
        """A network simulation's placement as runs, read again only when it may have changed."""
        version = self.keeper.placement_version if self.keeper is not None else None
        cached = self._network_cache
        if cached is None or version != cached[0] or self._network_stale:

            async def read():
                async with self.sessionmaker() as session:
                    return await network_placement(
                        session, self.spec.population_id, self.population_size, self.complete_graph
                    )

            placement = await self._store("read the population's placement", read)
            self._network_cache, self._network_stale = (version, placement), False
            cached = self._network_cache
        return cached[1]

    async def _network_memory(self) -> NetworkMemory:
        """Every agent's value and streak after the kept rounds, read back for a resumed run."""

        async def read():
            memory = NetworkMemory.empty(self.population_size)
            async with self.sessionmaker() as session:
                # Round by round, each carried forward from the rows kept (carried.py covers
                # runs that keep every decision too: each round's rows are then all of them).
                async for state in carried.carried_rounds(
                    session, self.simulation_id, self.resume.played
                ):
                    await asyncio.to_thread(memory.played, state.round, state.actions())
            return memory

        return await self._store("read the kept rounds' values", read)

    async def _groups(self) -> np.ndarray:
        """Each agent's group: its category of the run's group_by attribute (whose names the
        run keeps), else its connected component in the population's graph."""
        if self.spec.group_by is not None:
            return await self._store("read the agents' groups", self._attribute_groups)
        if self.complete_graph:  # one component, and no file to read
            return np.zeros(self.population_size, dtype=np.int64)
        if self.data_dir is None:
            raise SimulationFailed("a network simulation needs the manager's data dir")
        path = graph_path(self.data_dir, self.spec.population_id)
        try:
            return await asyncio.to_thread(group_labels, path)
        except (OSError, GraphFileError) as exc:
            raise SimulationFailed(
                f"population {self.spec.population_id}'s graph cannot be read: {exc}"
            ) from exc

    async def _attribute_groups(self) -> np.ndarray:
        async with self.sessionmaker() as session:
            groups, labels = await attribute_groups(
                session, self.spec.population_id, self.population_size, self.spec.group_by
            )
            await store.set_group_labels(session, self.simulation_id, labels)
        return groups

    async def _recover(self, deadline: float) -> bool:
        assert self.keeper is not None
        self._hosts_stale = True  # a worker failed or went away: ask the store again
        self._network_stale = True
        try:
            report = await self.keeper.repair(self.spec.population_id, replace_offline=True)
        except Exception as exc:
            if not is_store_outage(exc):
                raise
            # Not whole yet: the round tries again until its recovery deadline.
            log.warning(
                "simulation %s: repair could not reach the store: %r", self.simulation_id, exc
            )
            self._tell_outage()
            return False
        return report is not None and report.whole

    async def _gone(self, address: str) -> None:
        """Returns once no live worker has this address (the sweep marked it offline)."""
        while True:
            await asyncio.sleep(GONE_POLL_S)
            if address not in await self._live_addresses():
                return

    async def _live_addresses(self) -> set[str]:
        """Every live worker's address, read at most once per poll for all the round's
        watchers together. The read runs in a task of its own that the watchers wait for
        shielded: a watcher cancelled meanwhile (its worker's stream ended) leaves the query to
        finish, so no query is ever cut in the middle (its clean-up on a connection still busy
        would turn the cancellation into a database error)."""
        read_at, addresses = self._live
        if time.monotonic() - read_at < GONE_POLL_S:
            return addresses
        if self._live_read is None or self._live_read.done():
            self._live_read = asyncio.create_task(self._read_live_addresses())
            # Retrieved even when no watcher waits for it any more.
            self._live_read.add_done_callback(lambda task: task.cancelled() or task.exception())
        return await asyncio.shield(self._live_read)

    async def _read_live_addresses(self) -> set[str]:
        async with self.sessionmaker() as session:
            addresses = await registry.live_addresses(session)
        self._live = (time.monotonic(), addresses)
        return addresses

    def _fault(self, round_number: int, what: str) -> None:
        if self._faults is None:
            self._faults = FaultLog(self.sessionmaker)
        self._faults.add(self.simulation_id, round_number, what)
        self.hub.publish(
            SimulationFault(simulation_id=self.simulation_id, round=round_number, message=what)
        )

    def _committing(self, commit: asyncio.Task) -> None:
        if self.keeper is not None:
            self.keeper.committing(self.spec.population_id, commit)

    def _exclusive(self):
        if self.keeper is None:
            return contextlib.nullcontext()
        return self.keeper.hold(self.spec.population_id)

    async def run(self) -> None:
        spec = self.spec
        listeners = [
            _RetriedThroughOutages(self, listener)
            for listener in (
                PopulationStillDeployed(self.sessionmaker, spec.population_id),
                KeepRecord(self.sessionmaker, spec.population_id),
                PersistRounds(self.sessionmaker),
                PublishRoundEvents(self.hub, self.population_size),
                _PublishProgress(self),
            )
        ]
        parts = None
        if spec.assignment is not None:

            async def read_parts():
                async with self.sessionmaker() as session:
                    return await agent_parts(
                        session, spec.population_id, spec.policy_labels, spec.assignment
                    )

            parts = await self._store("read who plays which policy", read_parts)
        network = installed().get(spec.plugin).simulation.network
        self.env = GlobalEnvironment(
            spec,
            self._hosts,
            listeners,
            network=self._network if network else None,
            agent_groups=self._groups if network or spec.group_by else None,
            network_memory=self._network_memory if network else None,
            agent_parts=parts,
            spans=self._spans,
            population_size=self.population_size,
            recovery=self._recover if self.keeper is not None else None,
            gone=self._gone,
            exclusive=self._exclusive,
            faults=self.faults,
            told=self.resume.told,
            groups=self.resume.groups,
            metrics=self.resume.metrics,
            group_metrics=self.resume.group_metrics,
            played=self.resume.played,
            on_fault=self._fault,
            on_commit=self._committing,
        )
        self.env.cancelled = self.cancel_requested
        # How a run ends is written whatever it takes (a run must not stay `running` because
        # the database was away when it ended); the manager stopping still cancels the wait.
        final = FOREVER
        try:
            await self._set(lifecycle.RUNNING)
            await self.env.run()
            await self._set(lifecycle.COMPLETED, stop_reason=self.env.stop_reason, window_s=final)
        except SimulationCancelled:
            if self.pause_reason is not None:
                await self._set(lifecycle.PAUSED, pause_reason=self.pause_reason, window_s=final)
            else:
                await self._set(lifecycle.CANCELLED, window_s=final)
        except SimulationPaused as exc:
            log.warning("simulation %s paused: %s", self.simulation_id, exc)
            await self._set(lifecycle.PAUSED, pause_reason=str(exc), window_s=final)
        except SimulationFailed as exc:
            await self._set(lifecycle.FAILED, error=await self._explain(str(exc)), window_s=final)
        except asyncio.CancelledError:
            # The manager is stopping: the round in flight was cancelled with this task, and
            # the run stays `running` in the store, to be resumed by the next start.
            raise
        except Exception as exc:
            # A cancellation that a driver's clean-up replaced by its own error is still one.
            stop_if_cancelled(exc)
            if is_store_outage(exc):
                # A store call outside the retried ones: the same plain pause, never the
                # driver's text.
                log.warning(
                    "simulation %s paused on a database outage: %r", self.simulation_id, exc
                )
                reason = unavailable_reason(self.store_retry_s)
                await self._set(lifecycle.PAUSED, pause_reason=reason, window_s=final)
            else:
                log.exception("simulation %s failed", self.simulation_id)
                await self._set(lifecycle.FAILED, error=_internal_error(exc), window_s=final)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.shield(self.env.close())

    async def _explain(self, error: str) -> str:
        """A round that failed because its population was being deleted says so first."""
        population_id = self.spec.population_id
        try:
            async with self.sessionmaker() as session:
                population = await population_store.get_population(session, population_id)
        except Exception:
            return error
        if (
            population_lifecycle.is_playable(population.status)
            or f"population {population_id} is" in error
        ):
            return error
        return f"population {population_id} is {population.status}: {error}"

    async def cancel(self) -> None:
        if self.env is not None:
            await self.env.cancel()
        else:  # not started yet: it will see the flag first thing
            self.cancel_requested = True

    async def pause(self, reason: str) -> None:
        """Stop like a cancel (the round in flight is not kept), but end `paused`."""
        self.pause_reason = reason
        await self.cancel()


def _internal_error(error: BaseException) -> str:
    """The reason a run failed on an error nobody foresaw, in plain words: which constraint the
    database refused, or the error's kind; the details (driver text included) go to the log."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        constraint = getattr(current, "constraint_name", None)
        if isinstance(constraint, str) and constraint:
            return (
                f"the database refused to store the run's data (constraint {constraint}); "
                "the manager log has the details"
            )
        current = getattr(current, "orig", None) or current.__cause__ or current.__context__
    return (
        f"the run stopped on an internal error ({type(error).__name__}); the manager log has "
        "the details; resume it to go on from its last kept round"
    )


class _RetriedThroughOutages:
    """A round listener whose store calls ride out a database outage: each of its calls is
    tried again as a whole (they are idempotent: a round already kept is left as it is),
    then the run pauses (StoreUnavailable)."""

    def __init__(self, run: SimulationRun, listener) -> None:
        self.run = run
        self.listener = listener
        self.what = type(listener).__name__

    async def round_started(self, env, round_number) -> None:
        await self.run._store(
            f"{self.what} before round {round_number}",
            lambda: self.listener.round_started(env, round_number),
        )

    def decisions_arrived(self, env, round_number, answered) -> None:
        self.listener.decisions_arrived(env, round_number, answered)

    async def round_completed(self, env, result, decisions) -> None:
        await self.run._store(
            f"{self.what} after round {result.round}",
            lambda: self.listener.round_completed(env, result, decisions),
        )


class _PublishProgress:
    """`simulation.updated` after each round (current_round moved)."""

    def __init__(self, run: SimulationRun) -> None:
        self.run = run

    async def round_started(self, env, round_number) -> None:
        pass

    def decisions_arrived(self, env, round_number, answered) -> None:
        pass

    async def round_completed(self, env, result, decisions) -> None:
        async with self.run.sessionmaker() as session:
            simulation = await store.get_simulation(session, self.run.simulation_id)
        publish_simulation(self.run.hub, simulation)


class RunningSimulations:
    """Runs in flight in this manager process, by simulation id."""

    def __init__(self) -> None:
        self._runs: dict[int, SimulationRun] = {}

    def get(self, simulation_id: int) -> SimulationRun | None:
        return self._runs.get(simulation_id)

    def runs(self) -> Sequence[SimulationRun]:
        return list(self._runs.values())

    def start(self, run: SimulationRun, background: set[asyncio.Task]) -> asyncio.Task:
        self._runs[run.simulation_id] = run
        run.task = asyncio.create_task(run.run(), name=f"simulation-{run.simulation_id}")
        # The app cancels its background tasks at shutdown; keep a reference meanwhile.
        background.add(run.task)
        run.task.add_done_callback(background.discard)
        run.task.add_done_callback(lambda _: self._runs.pop(run.simulation_id, None))
        return run.task

    async def _settle(self, run: SimulationRun, wait_s: float) -> None:
        if run.task is not None:
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(asyncio.shield(run.task), wait_s)

    async def cancel(self, simulation_id: int, wait_s: float = 30.0) -> bool:
        """Cancel a run of this process and wait for it to settle; False when not running here."""
        run = self._runs.get(simulation_id)
        if run is None:
            return False
        await run.cancel()
        await self._settle(run, wait_s)
        return True

    async def pause(self, simulation_id: int, reason: str, wait_s: float = 30.0) -> bool:
        """Pause a run of this process and wait for it to settle; False when not running here."""
        run = self._runs.get(simulation_id)
        if run is None:
            return False
        await run.pause(reason)
        await self._settle(run, wait_s)
        return True
