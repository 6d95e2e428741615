"""Deleting populations, emptying one worker, and reconciling workers with the store.

Deleting takes the agents off every online worker that hosts them and removes their rows. A worker
that is offline cannot be asked: its rows are kept, marked orphaned, and the reaper removes them
from the worker (and then the rows) when it is back. The reaper also removes agents a worker
reports for populations the store no longer has (e.g. a deploy interrupted by a manager crash).
Emptying a worker does the same for every population placed on it: the rest of each population
stays where it is. Every step is idempotent, so a repeated delete or a reaper pass after a crash is harmless.
"""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy import select

from backend.db.models import Population, Worker
from backend.events.hub import EventHub
from backend.populations import store
from backend.simulations import store as simulation_store
from backend.workers import registry
from backend.workers.grpc_client import WorkerClient

log = logging.getLogger(__name__)
LIVE_STATES = ("online", "draining")
KEPT_STATUSES = ("deploying", "deployed", "deleting")


async def delete_population(sessionmaker, hub: EventHub, population_id: int) -> dict:
    topic = f"population:{population_id}"
    async with sessionmaker() as session:
        await store.set_status(session, population_id, "deleting")
        await session.commit()
        per_worker = await store.agents_per_worker(session, population_id)
        hosts = {
            worker_id: (state, address)
            for worker_id, state, address in await session.execute(
                select(Worker.id, Worker.state, Worker.address).where(
                    Worker.id.in_([w for w in per_worker if w is not None])
                )
            )
        }
    hub.publish(topic, "population.progress", {"population_id": population_id, "stage": "deleting"})

    removed_from, unreachable = [], []
    for worker_id in per_worker:
        if worker_id is None:
            continue
        state, address = hosts.get(worker_id, ("removed", ""))
        if state in LIVE_STATES:
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
        if unreachable:
            await store.mark_orphaned(session, population_id, unreachable)
        await store.delete_population_rows(session, population_id)
        await session.commit()
    result = {
        "population_id": population_id,
        "stage": "deleted",
        "workers_cleaned": len(removed_from),
        "workers_orphaned": len(unreachable),
    }
    hub.publish(topic, "population.progress", result)
    return result


class WorkerBusy(Exception):
    """The worker hosts part of a population that is still deploying or playing a simulation."""


async def clean_worker(sessionmaker, hub: EventHub, worker_id: int) -> dict:
    """Take every agent the store places on one worker off it, and their rows out of the store.

    Raises registry.UnknownWorker, or WorkerBusy while a population on it is deploying (its
    deploy would otherwise recreate or undo under our feet). An offline worker's agents are
    marked orphaned instead, and the reaper removes them when it is back.
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
    deploying = [pid for pid, status, _ in hosted if status == "deploying"]
    if deploying:
        raise WorkerBusy(
            f"worker {worker_id} hosts part of population {deploying[0]}, which is still "
            "deploying; try again when it is deployed or failed"
        )

    reachable = state in LIVE_STATES
    client = WorkerClient(address) if reachable else None
    populations = []
    try:
        for population_id, _status, count in hosted:
            if client is not None:
                try:
                    await client.delete_agents(population_id=str(population_id), timeout=60)
                except Exception as exc:  # gone since we looked: fall back to orphaning
                    log.warning("worker %s did not take its agents off: %s", worker_id, exc)
                    reachable, client = False, None
            async with sessionmaker() as session:
                if reachable:
                    await store.delete_on_worker(session, population_id, worker_id, orphaned=False)
                else:
                    await store.mark_orphaned(session, population_id, [worker_id])
                await session.commit()
            outcome = "removed" if reachable else "orphaned"
            populations.append({"population_id": population_id, "agents": count, "result": outcome})
            hub.publish(
                f"population:{population_id}",
                "population.progress",
                {
                    "population_id": population_id,
                    "stage": "worker_cleaned" if reachable else "worker_orphaned",
                    "worker_id": worker_id,
                    "agents": count,
                },
            )
    finally:
        if client is not None:
            await client.close()
    return {
        "worker_id": worker_id,
        "populations": populations,
        "agents_removed": sum(p["agents"] for p in populations if p["result"] == "removed"),
        "agents_orphaned": sum(p["agents"] for p in populations if p["result"] == "orphaned"),
    }


async def reap_once(sessionmaker) -> int:
    """One reconciliation pass over the online workers; returns how many removals it made."""
    async with sessionmaker() as session:
        workers = (
            await session.execute(
                select(Worker.id, Worker.address).where(Worker.state.in_(LIVE_STATES))
            )
        ).all()
    removals = 0
    for worker_id, address in workers:
        async with sessionmaker() as session:
            orphans = await store.orphans_on_worker(session, worker_id)
        try:
            async with WorkerClient(address) as client:
                for population_id, _count in orphans:
                    await client.delete_agents(population_id=str(population_id), timeout=60)
                    async with sessionmaker() as session:
                        await store.delete_on_worker(
                            session, population_id, worker_id, orphaned=True
                        )
                        await session.commit()
                    removals += 1
                info = await client.info()
                # Read the store after the worker answered, so a deploy that started in between
                # is seen as kept and its fresh agents are not taken for strays.
                for population_id in await _strays(sessionmaker, list(info.population_agents)):
                    await client.delete_agents(population_id=population_id, timeout=60)
                    removals += 1
        except Exception as exc:  # the worker may have just gone; the next pass retries
            log.warning("reaper could not reconcile worker %s at %s: %s", worker_id, address, exc)
    return removals


async def reap_forever(sessionmaker, every_s: float) -> None:
    while True:
        try:
            removed = await reap_once(sessionmaker)
            if removed:
                log.info("reaper removed %d stray population(s) from workers", removed)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("reaper pass failed; retrying")
        await asyncio.sleep(every_s)


async def _strays(sessionmaker, hosted: list[str]) -> list[str]:
    """The hosted population ids the store does not keep (unknown, failed or deleted).

    Only ids this manager issues (integers) are judged: agents created by driving a worker
    directly (benchmarks, tests) under other names are not the manager's to remove.
    """
    numeric = [int(p) for p in hosted if p.isdigit()]
    async with sessionmaker() as session:
        kept = (
            set(
                await session.scalars(
                    select(Population.id).where(
                        Population.id.in_(numeric), Population.status.in_(KEPT_STATUSES)
                    )
                )
            )
            if numeric
            else set()
        )
    return [p for p in hosted if p.isdigit() and int(p) not in kept]
