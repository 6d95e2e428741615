"""Which worker processes are held by, or free for, populations with a process per agent.

A population with `placement.dedicated_process` holds each process one of its agents is placed
on: ordinary placement skips those processes (held_workers), and a dedicated agent goes only on
a process that hosts nothing at all (taken_workers says which host something by the store).

Between choosing its processes and storing its agents a deploy holds them only in memory (a
deploy writes personas in between, which may take minutes): its claim keeps a concurrent deploy
off them. One manager places at a time (the leader lease), so memory is enough.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy.ext.asyncio import AsyncSession

from backend.populations import store

# {population id: (whether it is dedicated, the workers its deploy chose)} until it is stored.
_claims: dict[int, tuple[bool, frozenset[int]]] = {}


def claim(population_id: int, dedicated: bool, worker_ids: Iterable[int]) -> None:
    _claims[population_id] = (dedicated, frozenset(worker_ids))


def release(population_id: int) -> None:
    _claims.pop(population_id, None)


async def held_workers(session: AsyncSession) -> set[int]:
    """The workers that dedicated populations hold: no other agent may go there."""
    held = {w for dedicated, workers in _claims.values() if dedicated for w in workers}
    for population_id in await store.dedicated_population_ids(session):
        held |= await store.workers_hosting(session, population_id)
    return held


async def taken_workers(session: AsyncSession, worker_ids: Iterable[int]) -> set[int]:
    """Those of these workers that host something or are about to: agents the store places
    there (heartbeats report them a second late), or a deploy in flight chose them."""
    claimed = {w for _, workers in _claims.values() for w in workers}
    return claimed | await store.workers_with_agents(session, list(worker_ids))
