"""Deleting populations, emptying one worker, and reconciling workers with the store.

Deleting takes the agents off every live worker that hosts them and removes every row. A worker
that is offline cannot be asked: the reaper removes the agents when it is back, because the
store no longer keeps their population. The reaper also removes agents a worker reports for
populations the store does not keep on it (a deploy interrupted by a manager crash, agents
re-placed while the worker was away). Emptying a worker moves its agents to other workers (the
placement keeper), so its populations stay whole. Every step is idempotent, so a repeated delete
or a reaper pass after a crash is harmless. Rows marked orphaned by earlier versions are still
reclaimed by the reaper.
"""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path

from backend.cancellation import stop_if_cancelled
from backend.db.models import Population
from backend.errors import Conflict
from backend.events.catalog import PopulationProgress
from backend.events.hub import EventHub
from backend.graphs.files import SUFFIX, graphs_dir
from backend.lifecycles import population as lifecycle
from backend.populations import graph as population_graph
from backend.populations import store
from backend.simulations import store as simulation_store
from backend.workers import registry
from backend.workers.grpc_client import WorkerClient
from backend.workers.liveness import Liveness
from backend.workers.plane_errors import WorkerPlaneError
from worker_server.worker_states import REMOVED, is_live

log = logging.getLogger(__name__)
# Each visit of the reaper is a gRPC call to a worker: a pass over 1,000 workers takes 100 s.
REAPER_VISITS_PER_S = 10.0


async def delete_population(
    sessionmaker,
    hub: EventHub,
    population_id: int,
    *,
    final_status: str = lifecycle.DELETED,
    error: str | None = None,
) -> dict:
    """Agents off every live worker hosting them, then every row (final_status: deleted; failed
    when undoing a deploy the manager could not finish). A worker that cannot be reached keeps
    its agents until the reaper finds them there (the population is no longer kept)."""
    async with sessionmaker() as session:
        await store.set_status(session, population_id, lifecycle.DELETING)
        await session.commit()
        per_worker = await store.agents_per_worker(session, population_id)
        rows = await registry.by_ids(session, [w for w in per_worker if w is not None])
        hosts = {worker_id: (w.state, w.address) for worker_id, w in rows.items()}
    hub.publish(
        PopulationProgress(
            population_id=population_id, stage=lifecycle.DELETING, agents=sum(per_worker.values())
        )
    )

    removed_from, unreachable = [], []
    for worker_id in per_worker:
        if worker_id is None:
            continue
        state, address = hosts.get(worker_id, (REMOVED, ""))
        if is_live(state):
            try:
                async with WorkerClient(address) as client:
                    await client.delete_agents(population_id=str(population_id), timeout=60)
                removed_from.append(worker_id)
                continue
            except Exception as exc:
                log.warning(
                    "worker %s did not take population %s off: %s", worker_id, population_id, exc
                )
        unreachable.append(worker_id)

    async with sessionmaker() as session:
        await store.delete_population_rows(
            session, population_id, final_status=final_status, error=error, orphans_too=True
        )
        await session.commit()
        graph_file = population_graph.file_of(await store.get_population(session, population_id))
    if graph_file is not None:
        await asyncio.to_thread(delete_graph_file, graph_file)
    result = {
        "population_id": population_id,
        "stage": final_status,
        "workers_cleaned": len(removed_from),
        "workers_orphaned": len(unreachable),
        "agents_removed": sum(per_worker[w] for w in removed_from),
    }
    hub.publish(PopulationProgress(**result))
    return result


def delete_graph_file(path: Path) -> None:
    """Remove a graph file and a crashed write's temporary file beside it (idempotent)."""
    for leftover in path.parent.glob(f".{path.name}.*.tmp"):
        leftover.unlink(missing_ok=True)
    path.unlink(missing_ok=True)


GRAPH_FILE = re.compile(rf"^\.?population-(\d+){re.escape(SUFFIX)}(\..*\.tmp)?$")


async def remove_stray_graphs(sessionmaker, data_dir: Path) -> list[int]:
    """Remove the graph files (and temporary files) of populations the store no longer keeps
    (unknown, failed or deleted); returns their population ids. Run at start-up and before
    each deploy: a manager stopped between writing a file and recording it leaves one."""
    directory = graphs_dir(data_dir)
    if not directory.is_dir():
        return []
    found: dict[int, list[Path]] = {}
    for path in directory.iterdir():
        match = GRAPH_FILE.match(path.name)
        if match:
            found.setdefault(int(match.group(1)), []).append(path)
    if not found:
        return []
    async with sessionmaker() as session:
        kept = await store.statuses(session, lifecycle.HOLDING, ids=list(found))
    strays = sorted(pid for pid in found if pid not in kept)
    for pid in strays:
        for path in found[pid]:
            path.unlink(missing_ok=True)
    if strays:
        log.info("removed the graph files of %d populations the store does not keep", len(strays))
    return strays


class DeleteRefused(Conflict):
    """The population is still deploying, or playing a simulation."""


async def begin_delete(session, population_id: int) -> tuple[Population, bool]:
    """Mark the population deleting; returns it and whether its clean-up must start (not when
    it is deleted already: deleting again is harmless). DeleteRefused while it deploys or
    plays."""
    population = await store.get_population(session, population_id)
    if population.status == lifecycle.DEPLOYING:
        raise DeleteRefused(
            f"population {population_id} is still deploying; delete it when it is done"
        )
    running = await simulation_store.active_simulation(session, population_id)
    if running is not None:
        raise DeleteRefused(
            f"population {population_id} is playing simulation {running.id}; "
            "cancel it (POST /api/simulations/{id}/cancel) before deleting the population"
        )
    if population.status == lifecycle.DELETED:
        return population, False
    return await store.set_status(session, population_id, lifecycle.DELETING), True


class WorkerBusy(Conflict):
    """The worker hosts part of a population that is still deploying or playing a simulation."""


async def clean_worker(sessionmaker, hub: EventHub, keeper, worker_id: int) -> dict:
    """Move every agent the store places on one worker to other online workers (those that do
    not fit anywhere stay in the store, placed nowhere, and their population is degraded until
    a repair finds room), then take them off the worker.

    Raises registry.UnknownWorker, or WorkerBusy while a population on it is deploying (its
    deploy would otherwise recreate or undo under our feet) or playing a simulation.
    """
    async with sessionmaker() as session:
        worker = await registry.get(session, worker_id)
        state, address = worker.state, worker.address
        hosted = await store.populations_on_worker(session, worker_id)
        for population_id, _status, _count in hosted:
            running = await simulation_store.active_simulation(session, population_id)
            if running is not None:
                raise WorkerBusy(
                    f"worker {worker_id} hosts part of population {population_id}, which is "
                    f"playing simulation {running.id}; cancel it first"
                )
    deploying = [pid for pid, status, _ in hosted if status == lifecycle.DEPLOYING]
    if deploying:
        raise WorkerBusy(
            f"worker {worker_id} hosts part of population {deploying[0]}, which is still "
            "deploying; try again when it is deployed or failed"
        )

    populations = []
    for population_id, _status, count in hosted:
        moved, unplaced = await keeper.move_off(population_id, worker_id)
        if is_live(state):
            try:
                async with WorkerClient(address) as client:
                    await client.delete_agents(population_id=str(population_id), timeout=60)
            except Exception as exc:  # gone since we looked: the reaper removes them later
                log.warning("worker %s did not take its agents off: %s", worker_id, exc)
        populations.append(
            {"population_id": population_id, "agents": count, "moved": moved, "unplaced": unplaced}
        )
        hub.publish(
            PopulationProgress(
                population_id=population_id,
                stage="worker_cleaned",
                worker_id=worker_id,
                agents=count,
                moved=moved,
                unplaced=unplaced,
            )
        )
    return {
        "worker_id": worker_id,
        "populations": populations,
        "agents_moved": sum(p["moved"] for p in populations),
        "agents_unplaced": sum(p["unplaced"] for p in populations),
    }


async def reap_once(
    sessionmaker, liveness: Liveness | None = None, visits_per_s: float | None = None
) -> int:
    """One reconciliation pass over the online workers; returns how many removals it made.

    A worker's hosted populations come from its last heartbeat (liveness) when it said them,
    so a worker with nothing to remove costs no call; otherwise it is asked (GetInfo). With
    visits_per_s the workers are visited at that pace, so a large fleet's pass takes longer
    instead of costing the manager more."""
    async with sessionmaker() as session:
        workers = await registry.live_workers(session)
        orphans = await store.orphans_by_worker(session, [worker_id for worker_id, _ in workers])
        # Orphans on a removed worker have nobody left to clean them off: only the rows remain.
        removed = await store.delete_orphans_on(session, registry.removed_ids())
        await session.commit()
    removals = 1 if removed else 0
    for visit, (worker_id, address) in enumerate(workers):
        if visits_per_s and visit:
            await asyncio.sleep(1 / visits_per_s)
        try:
            removals += await _reconcile_worker(
                sessionmaker, liveness, worker_id, address, orphans.get(worker_id, [])
            )
        except Exception as exc:  # the worker may have just gone; the next pass retries
            stop_if_cancelled(exc)
            why = f"{exc.status}: {exc.message}" if isinstance(exc, WorkerPlaneError) else exc
            log.warning("reaper could not reconcile worker %s at %s: %s", worker_id, address, why)
    return removals


async def _reconcile_worker(
    sessionmaker, liveness: Liveness | None, worker_id: int, address: str, orphans: list[int]
) -> int:
    """Remove a worker's orphans and strays; returns how many populations it removed."""
    hosted = liveness.hosted(worker_id) if liveness is not None else None
    strays: list[str] = []
    if hosted is not None:
        # Read the store after the worker reported, so a deploy that started in between is
        # seen as kept and its fresh agents are not taken for strays.
        strays = await _strays(sessionmaker, worker_id, list(hosted))
        if not orphans and not strays:
            return 0
    removals = 0
    async with WorkerClient(address) as client:
        for population_id in orphans:
            await client.delete_agents(population_id=str(population_id), timeout=60)
            async with sessionmaker() as session:
                await store.delete_on_worker(session, population_id, worker_id, orphaned=True)
                await session.commit()
            removals += 1
        if hosted is None:
            info = await client.info()
            strays = await _strays(sessionmaker, worker_id, list(info.population_agents))
        for population_id in strays:
            await client.delete_agents(population_id=population_id, timeout=60)
            removals += 1
    return removals


async def reap_forever(sessionmaker, liveness: Liveness, every_s: float) -> None:
    while True:
        try:
            removed = await reap_once(sessionmaker, liveness, REAPER_VISITS_PER_S)
            if removed:
                log.info("reaper removed %d stray population(s) from workers", removed)
        except Exception as exc:
            stop_if_cancelled(exc)  # a cancellation replaced by a driver's error stays one
            log.exception("reaper pass failed; retrying")
        stop_if_cancelled()
        await asyncio.sleep(every_s)


async def _strays(sessionmaker, worker_id: int, hosted: list[str]) -> list[str]:
    """The hosted population ids the store does not keep on this worker: unknown, failed or
    deleted, or deployed with none of its agents placed here (they were re-placed while this
    worker was away).

    Only ids this manager issues (integers) are judged: agents created by driving a worker
    directly (benchmarks, tests) under other names are not the manager's to remove.
    """
    numeric = [int(p) for p in hosted if p.isdigit()]
    if not numeric:
        return []
    async with sessionmaker() as session:
        statuses = await store.statuses(session, lifecycle.HOLDING, ids=numeric)
        placed_here = {
            population_id
            for population_id in statuses
            if await store.has_agents_on(session, population_id, [worker_id])
        }
    # A deploy or a delete in flight owns its agents until it ends.
    kept = {pid for pid, st in statuses.items() if st in lifecycle.IN_FLIGHT or pid in placed_here}
    return [p for p in hosted if p.isdigit() and int(p) not in kept]
