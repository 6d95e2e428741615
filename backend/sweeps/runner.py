"""A sweep's life on the manager: running -> completed | failed | cancelled.

One task per running sweep (`SweepDriver`) launches the grid's points through the one launch
path (backend.simulations.launch) as populations free up: in `sequence` one run at a time,
point i on populations[i % n]; in `parallel` one run per population at a time. It wakes on its
runs' `simulation.updated` events (with a slow poll as a safety net), re-reads the store and
decides again, so its state is the store's: a restarted manager starts a driver per running
sweep (backend.reconcile) and runs already created are found by sweep_id, never launched twice.

A launch that is refused fails the sweep, naming the point and why, and cancels its other
runs, so a final sweep never has a live run. Events go out on topic `sweep:{id}`:
`sweep.updated` (the sweep's status) and `sweep.run` (one of its runs changed).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from pydantic import ValidationError

from backend.db.models import Simulation, Sweep
from backend.errors import Conflict, InvalidFields
from backend.events.catalog import (
    SimulationDeleted,
    SimulationUpdated,
    SweepDeleted,
    SweepRun,
    SweepUpdated,
    parse,
)
from backend.events.hub import EventHub, Subscription
from backend.lifecycles import simulation as simulation_lifecycle
from backend.lifecycles import sweep as lifecycle
from backend.runtime import Runtime
from backend.simulations import store as simulation_store
from backend.simulations.launch import LaunchRefused, launch
from backend.simulations.runner import publish_simulation, simulation_updated
from backend.sweeps import store
from backend.sweeps.config import SweepConfig, params_key, params_text

log = logging.getLogger(__name__)
# The store is read again this often even without events (an event lost to an overflow).
POLL_S = 5.0
SIMULATION_TOPICS = "simulation:*"


def publish_sweep(hub: EventHub, sweep: Sweep) -> None:
    hub.publish(
        SweepUpdated(
            sweep_id=sweep.id,
            name=sweep.name,
            status=sweep.status,
            mode=sweep.mode,
            runs=sweep.runs,
            error=sweep.error,
        )
    )


def _publish_run(hub: EventHub, sweep_id: int, point: int | None, run: SimulationUpdated) -> None:
    hub.publish(
        SweepRun(
            sweep_id=sweep_id,
            point=point,
            simulation_id=run.simulation_id,
            population_id=run.population_id,
            status=run.status,
            current_round=run.current_round,
            rounds=run.rounds,
        )
    )


def refusal_text(exc: Exception) -> str:
    """Why launch refused, in a sentence (its 409 message, or each field and problem)."""
    if isinstance(exc, ValidationError | InvalidFields):
        errors = exc.issues if isinstance(exc, InvalidFields) else exc.errors(include_url=False)
        return "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', '')}" for e in errors
        )
    return str(exc)


async def cancel_runs(runtime: Runtime, sweep_id: int) -> None:
    """Cancel every live run of the sweep (paused ones too)."""
    async with runtime.sessionmaker() as session:
        live = [
            r
            for r in await simulation_store.sweep_runs(session, sweep_id)
            if not simulation_lifecycle.is_final(r.status)
        ]

    async def cancel(run: Simulation) -> None:
        if await runtime.simulations.cancel(run.id):
            return
        async with runtime.sessionmaker() as session:
            cancelled = await simulation_store.set_status(
                session, run.id, simulation_lifecycle.CANCELLED
            )
        if cancelled is not None:
            publish_simulation(runtime.hub, cancelled)

    await asyncio.gather(*(cancel(r) for r in live))


class SweepDriver:
    def __init__(self, runtime: Runtime, sweep_id: int) -> None:
        self.runtime = runtime
        self.sweep_id = sweep_id
        # Held while deciding and launching: a cancel takes it, so it never cuts a launch in two.
        self.lock = asyncio.Lock()
        self.task: asyncio.Task | None = None
        self._point_of: dict[int, int] = {}  # simulation id -> point (0-based)

    async def run(self) -> None:
        hub = self.runtime.hub
        sub = hub.subscribe({SIMULATION_TOPICS})
        try:
            while True:
                async with self.lock:
                    if await self._step():
                        return
                sub = await self._wait(sub)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("sweep %s failed", self.sweep_id)
            await self._fail(f"{type(exc).__name__}: {exc}")
        finally:
            hub.unsubscribe(sub)

    async def _step(self) -> bool:
        """Launch what can be launched now; True when the sweep is over."""
        async with self.runtime.sessionmaker() as session:
            sweep = await store.get_sweep(session, self.sweep_id)
            if sweep.status != lifecycle.RUNNING:
                return True
            runs = await simulation_store.sweep_runs(session, self.sweep_id)
        config = SweepConfig.model_validate(sweep.config)
        points = config.points()
        index = {params_key(p): i for i, p in enumerate(points)}
        self._point_of = {r.id: index.get(params_key(r.sweep_params or {})) for r in runs}
        launched = set(self._point_of.values())
        waiting = [i for i in range(len(points)) if i not in launched]
        active = [r for r in runs if not simulation_lifecycle.is_final(r.status)]
        if not waiting and not active:
            await self._finish(lifecycle.COMPLETED)
            return True
        if config.mode == "sequence":
            targets = (
                []
                if active or not waiting
                else [(waiting[0], config.populations[waiting[0] % len(config.populations)])]
            )
        else:
            busy = {r.population_id for r in active}
            free = [p for p in config.populations if p not in busy]
            targets = list(zip(waiting, free, strict=False))
        for point, population_id in targets:
            params = points[point]
            try:
                simulation = await launch(
                    self.runtime,
                    config.simulation_config(point, population_id),
                    sweep_id=self.sweep_id,
                    sweep_params=params,
                )
            except (LaunchRefused, ValidationError, InvalidFields) as exc:
                await self._fail(
                    f"point {point + 1} ({params_text(params)}) on population {population_id} "
                    f"was refused: {refusal_text(exc)}"
                )
                return True
            self._point_of[simulation.id] = point
            _publish_run(self.runtime.hub, self.sweep_id, point + 1, simulation_updated(simulation))
        return False

    async def _wait(self, sub: Subscription) -> Subscription:
        """Until one of the sweep's runs reaches a final status (or POLL_S passes); forwards
        each of its runs' updates as `sweep.run`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + POLL_S
        while True:
            if sub.overflowed.is_set():  # dropped by the hub: subscribe again, re-read the store
                self.runtime.hub.unsubscribe(sub)
                return self.runtime.hub.subscribe({SIMULATION_TOPICS})
            try:
                message = await asyncio.wait_for(sub.queue.get(), deadline - loop.time())
            except TimeoutError:
                return sub
            if '"simulation.updated"' not in message:  # round progress: not ours to parse
                continue
            event = parse(message, only=(SimulationUpdated,))
            if event is None:
                continue
            run = event.payload
            point = self._point_of.get(run.simulation_id)
            if point is None:
                continue
            _publish_run(self.runtime.hub, self.sweep_id, point + 1, run)
            if simulation_lifecycle.is_final(run.status):
                return sub

    async def _finish(self, status: str, error: str | None = None) -> None:
        async with self.runtime.sessionmaker() as session:
            sweep = await store.finish(session, self.sweep_id, status, error=error)
        if sweep is not None:
            publish_sweep(self.runtime.hub, sweep)

    async def _fail(self, error: str) -> None:
        log.warning("sweep %s failed: %s", self.sweep_id, error)
        # Runs first, then the sweep: a sweep read as failed has no run still going.
        await cancel_runs(self.runtime, self.sweep_id)
        await self._finish(lifecycle.FAILED, error)


class RunningSweeps:
    """The sweeps this manager process drives, by id."""

    def __init__(self) -> None:
        self._drivers: dict[int, SweepDriver] = {}

    def start(self, runtime: Runtime, sweep_id: int) -> SweepDriver:
        if sweep_id in self._drivers:
            return self._drivers[sweep_id]
        driver = SweepDriver(runtime, sweep_id)
        self._drivers[sweep_id] = driver
        driver.task = asyncio.create_task(driver.run(), name=f"sweep-{sweep_id}")
        # The app cancels its background tasks at shutdown; keep a reference meanwhile.
        runtime.background.add(driver.task)
        driver.task.add_done_callback(runtime.background.discard)
        driver.task.add_done_callback(lambda _: self._drivers.pop(sweep_id, None))
        return driver

    async def stop(self, sweep_id: int) -> None:
        """Stop driving a sweep, between two launches, and wait for its task to end."""
        driver = self._drivers.get(sweep_id)
        if driver is None or driver.task is None:
            return
        async with driver.lock:
            driver.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await driver.task


async def start_sweep(runtime: Runtime, config: SweepConfig) -> Sweep:
    """Store a running sweep and start driving it."""
    async with runtime.sessionmaker() as session:
        sweep = await store.create_sweep(
            session,
            name=config.name,
            mode=config.mode,
            config=config.model_dump(mode="json"),
            runs=config.runs,
        )
    publish_sweep(runtime.hub, sweep)
    runtime.sweeps.start(runtime, sweep.id)
    return sweep


async def cancel_sweep(runtime: Runtime, sweep_id: int) -> Sweep | None:
    """Stop launching, end the sweep `cancelled` and cancel its live runs; None when it was
    already final."""
    await runtime.sweeps.stop(sweep_id)
    async with runtime.sessionmaker() as session:
        sweep = await store.finish(session, sweep_id, lifecycle.CANCELLED)
    if sweep is None:
        return None
    publish_sweep(runtime.hub, sweep)
    await cancel_runs(runtime, sweep_id)
    return sweep


class SweepBusy(Conflict):
    """The sweep (or one of its runs) is not in a state that allows the action."""


async def cancel(runtime: Runtime, session, sweep_id: int) -> Sweep:
    """The operator's cancel: SweepBusy unless the sweep is running."""
    sweep = await store.get_sweep(session, sweep_id)
    if sweep.status != lifecycle.RUNNING:
        raise SweepBusy(f"sweep {sweep_id} is already {sweep.status}")
    if await cancel_sweep(runtime, sweep_id) is None:
        raise SweepBusy(f"sweep {sweep_id} ended meanwhile")
    return await store.get_sweep(session, sweep_id)


async def delete(session, hub: EventHub, sweep_id: int) -> None:
    """A finished sweep, with every run's rounds and decisions; SweepBusy while it (or one of
    its runs) is running."""
    sweep = await store.get_sweep(session, sweep_id)
    if sweep.status == lifecycle.RUNNING:
        raise SweepBusy(f"sweep {sweep_id} is running: cancel it first")
    for run in await simulation_store.sweep_runs(session, sweep_id):
        try:
            await simulation_store.delete_simulation(session, run.id)
        except simulation_store.UnknownSimulation:
            continue  # deleted on its own meanwhile
        except simulation_store.SimulationActive as exc:
            raise SweepBusy(
                f"simulation {run.id} of sweep {sweep_id} is {exc.status}: cancel it first"
            ) from None
        hub.publish(SimulationDeleted(simulation_id=run.id))
    await store.delete_sweep_row(session, sweep_id)
    hub.publish(SweepDeleted(sweep_id=sweep_id))


async def resume_sweeps(runtime: Runtime) -> list[int]:
    """Start-up: drive every sweep the store says is running again."""
    async with runtime.sessionmaker() as session:
        ids = [s.id for s in await store.running_sweeps(session)]
    for sweep_id in ids:
        runtime.sweeps.start(runtime, sweep_id)
    return ids
