"""The per-process concurrency cap: a FIFO semaphore counted in agents."""

from __future__ import annotations

import asyncio

import pytest

from worker_server.rounds import AgentSlots


async def test_cohorts_wait_their_turn_in_arrival_order():
    slots = AgentSlots(10)
    order = []
    await slots.acquire(8)

    async def take(name, n):
        await slots.acquire(n)
        order.append(name)

    big = asyncio.create_task(take("big", 9))
    await asyncio.sleep(0)
    small = asyncio.create_task(take("small", 1))
    await asyncio.sleep(0.01)
    assert order == [], "the small cohort fits but must not overtake the big one"
    slots.release(8)
    await asyncio.gather(big, small)
    assert order == ["big", "small"] and slots.in_flight == 10


async def test_a_cancelled_waiter_gives_way():
    slots = AgentSlots(4)
    await slots.acquire(3)
    stuck = asyncio.create_task(slots.acquire(4))
    await asyncio.sleep(0)
    behind = asyncio.create_task(slots.acquire(1))
    await asyncio.sleep(0.01)
    assert not behind.done()
    stuck.cancel()
    await asyncio.wait_for(behind, 1)
    assert slots.in_flight == 4


def test_the_cap_must_be_positive_and_cohorts_must_fit():
    with pytest.raises(ValueError):
        AgentSlots(0)
    with pytest.raises(ValueError):
        asyncio.run(AgentSlots(2).acquire(3))
    with pytest.raises(RuntimeError):
        AgentSlots(2).release(1)
