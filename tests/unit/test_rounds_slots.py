"""The per-process concurrency cap: a FIFO semaphore counted in agents."""

from __future__ import annotations

import asyncio

import pytest

from tests.support import wait_until
from worker_server.rounds import AgentSlots


def queued(slots: AgentSlots) -> int:
    """Cohorts waiting for slots (the queue is private; this test is its neighbour)."""
    return len(slots._waiters)


async def test_cohorts_wait_their_turn_in_arrival_order():
    slots = AgentSlots(10)
    order = []
    await slots.acquire(8)

    async def take(name, n):
        await slots.acquire(n)
        order.append(name)

    big = asyncio.create_task(take("big", 9))
    await wait_until(lambda: queued(slots) == 1, what="the big cohort queued")
    small = asyncio.create_task(take("small", 1))
    # Queued behind it, or (wrongly) let through: either ends the wait.
    await wait_until(lambda: queued(slots) == 2 or order, what="the small cohort queued")
    assert order == [], "the small cohort fits but must not overtake the big one"
    slots.release(8)
    await asyncio.gather(big, small)
    assert order == ["big", "small"] and slots.in_flight == 10


async def test_a_cancelled_waiter_gives_way():
    slots = AgentSlots(4)
    await slots.acquire(3)
    stuck = asyncio.create_task(slots.acquire(4))
    await wait_until(lambda: queued(slots) == 1, what="the cohort of 4 queued")
    behind = asyncio.create_task(slots.acquire(1))
    await wait_until(lambda: queued(slots) == 2 or behind.done(), what="the cohort of 1 queued")
    assert not behind.done(), "the cohort of 1 fits but must wait behind the one of 4"
    stuck.cancel()
    await asyncio.wait_for(behind, 15)  # a hang guard: the cancel hands the slot on at once
    assert slots.in_flight == 4


def test_the_cap_must_be_positive_and_cohorts_must_fit():
    with pytest.raises(ValueError):
        AgentSlots(0)
    with pytest.raises(ValueError):
        asyncio.run(AgentSlots(2).acquire(3))
    with pytest.raises(RuntimeError):
        AgentSlots(2).release(1)
