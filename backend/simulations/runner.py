"""A simulation's life on the manager: pending -> running -> completed | failed | cancelled.

`SimulationRun` wires the global environment to its listeners and the store, turns every way a
run can end into a final status with a clear error, and publishes `simulation.updated` on each
change. `RunningSimulations` is this manager process's table of runs in flight (for cancel, and
to tell a live run from a row left `running` by a manager that stopped).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.db.models import Simulation, Worker
from backend.events.hub import EventHub
from backend.populations import store as population_store
from backend.simulations import store
from backend.simulations.environment import (
    GlobalEnvironment,
    SimulationCancelled,
    SimulationFailed,
)
from backend.simulations.listeners import (
    PersistRounds,
    PopulationStillDeployed,
    PublishRoundEvents,
    StopWhenConverged,
    topic,
)
from backend.simulations.spec import GameSpec
from backend.workers.grpc_client import WorkerClient

log = logging.getLogger(__name__)
LIVE_WORKER_STATES = ("online", "draining")


class HostsUnavailable(Exception):
    """A worker hosting part of the population cannot be reached through the registry."""


async def hosting_workers(session: AsyncSession, population_id: int) -> list[tuple[int, str]]:
    """(worker id, address) of every worker process hosting the population's agents.

    Raises HostsUnavailable naming the workers that are not live: a round on part of the
    population would not be the game the user asked for.
    """
    per_worker = await population_store.agents_per_worker(session, population_id)
    ids = [w for w in per_worker if w is not None]
    rows = {
        wid: (state, address)
        for wid, state, address in await session.execute(
            select(Worker.id, Worker.state, Worker.address).where(Worker.id.in_(ids))
        )
    }
    down = [
        f"worker {wid} ({rows.get(wid, ('removed',))[0]})"
        for wid in sorted(ids)
        if rows.get(wid, ("removed", ""))[0] not in LIVE_WORKER_STATES
    ]
    if down:
        raise HostsUnavailable(
            f"population {population_id} has agents on workers that are not online: "
            + ", ".join(down)
        )
    return [(wid, rows[wid][1]) for wid in sorted(ids)]


def publish_simulation(hub: EventHub, simulation: Simulation) -> None:
    hub.publish(
        topic(simulation.id),
        "simulation.updated",
        {
            "simulation_id": simulation.id,
            "population_id": simulation.population_id,
            "status": simulation.status,
            "rounds": simulation.rounds,
            "current_round": simulation.current_round,
            "error": simulation.error,
            "stop_reason": simulation.stop_reason,
        },
    )


@dataclass
class SimulationRun:
    sessionmaker: async_sessionmaker
    hub: EventHub
    spec: GameSpec
    addresses: list[str]
    total_agents: int
    env: GlobalEnvironment | None = None
    task: asyncio.Task | None = None
    cancel_requested: bool = False

    @property
    def simulation_id(self) -> int:
        return self.spec.simulation_id

    async def _set(self, status: str, **fields) -> None:
        async with self.sessionmaker() as session:
            simulation = await store.set_status(session, self.simulation_id, status, **fields)
        if simulation is not None:
            publish_simulation(self.hub, simulation)

    async def run(self) -> None:
        clients = [WorkerClient(address) for address in self.addresses]
        spec = self.spec
        listeners = [
            PopulationStillDeployed(self.sessionmaker, spec.population_id),
            PersistRounds(self.sessionmaker),
            PublishRoundEvents(self.hub, self.total_agents),
            _PublishProgress(self),
        ]
        if spec.converge_window is not None:
            listeners.append(StopWhenConverged(spec.converge_window, spec.converge_tolerance))
        self.env = GlobalEnvironment(spec, clients, listeners)
        self.env.cancelled = self.cancel_requested
        try:
            await self._set("running")
            await self.env.run()
            await self._set("completed", stop_reason=self.env.stop_reason)
        except SimulationCancelled:
            await self._set("cancelled")
        except SimulationFailed as exc:
            await self._set("failed", error=await self._explain(str(exc)))
        except asyncio.CancelledError:
            # The manager is stopping: the round in flight was cancelled with this task.
            with contextlib.suppress(Exception):
                await asyncio.shield(
                    self._set("failed", error="the manager stopped during the simulation")
                )
            raise
        except Exception as exc:
            log.exception("simulation %s failed", self.simulation_id)
            await self._set("failed", error=f"{type(exc).__name__}: {exc}")
        finally:
            for client in clients:
                with contextlib.suppress(Exception):
                    await client.close()

    async def _explain(self, error: str) -> str:
        """A round that failed because its population was being deleted says so first."""
        population_id = self.spec.population_id
        try:
            async with self.sessionmaker() as session:
                population = await population_store.get_population(session, population_id)
        except Exception:
            return error
        if population.status == "deployed" or f"population {population_id} is" in error:
            return error
        return f"population {population_id} is {population.status}: {error}"

    async def cancel(self) -> None:
        if self.env is not None:
            await self.env.cancel()
        else:  # not started yet: it will see the flag first thing
            self.cancel_requested = True


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

    def start(self, run: SimulationRun, background: set[asyncio.Task]) -> asyncio.Task:
        self._runs[run.simulation_id] = run
        run.task = asyncio.create_task(run.run(), name=f"simulation-{run.simulation_id}")
        # The app cancels its background tasks at shutdown; keep a reference meanwhile.
        background.add(run.task)
        run.task.add_done_callback(background.discard)
        run.task.add_done_callback(lambda _: self._runs.pop(run.simulation_id, None))
        return run.task

    async def cancel(self, simulation_id: int, wait_s: float = 30.0) -> bool:
        """Cancel a run of this process and wait for it to settle; False when not running here."""
        run = self._runs.get(simulation_id)
        if run is None:
            return False
        await run.cancel()
        if run.task is not None:
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(asyncio.shield(run.task), wait_s)
        return True


async def settle_stale(
    sessionmaker: async_sessionmaker, hub: EventHub, runs: RunningSimulations, simulation_id: int
) -> bool:
    """A simulation the store says is active but no run of this process holds (the manager
    stopped mid-run) is failed, so its population is free again. True when it was stale."""
    if runs.get(simulation_id) is not None:
        return False
    async with sessionmaker() as session:
        simulation = await store.set_status(
            session,
            simulation_id,
            "failed",
            error="the manager stopped during the simulation",
        )
    if simulation is not None:
        publish_simulation(hub, simulation)
    return simulation is not None
