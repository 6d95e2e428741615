"""The run timeline's follower and store, on SQLite and on Postgres: what the hub's events become,
pages, a resume told from a start, a hub overflow caught up, and deletion with the run."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from backend.db.migrate import current, downgrade, upgrade
from backend.db.session import make_engine, make_sessionmaker
from backend.events import hub as hub_module
from backend.events.catalog import SimulationFault
from backend.events.hub import EventHub
from backend.simulations import store, timeline
from backend.simulations.timeline import RunTimeline, status_entry
from tests.support_events import round_completed, simulation_updated


async def _has_run_events(url: str) -> bool:
    from sqlalchemy import inspect

    engine = make_engine(url)
    async with engine.connect() as conn:
        names = await conn.run_sync(lambda c: set(inspect(c).get_table_names()))
    await engine.dispose()
    return "run_events" in names


async def test_migration_0011_up_down_up(database_url):
    await asyncio.to_thread(upgrade, database_url, "0011_run_events")
    assert await _has_run_events(database_url)
    await asyncio.to_thread(downgrade, database_url, "0010_workbench")
    assert not await _has_run_events(database_url)
    assert await asyncio.to_thread(current, database_url) == "0010_workbench"
    await asyncio.to_thread(upgrade, database_url, "0011_run_events")
    assert await _has_run_events(database_url)


@pytest.fixture
async def sessions(database_url):
    await asyncio.to_thread(upgrade, database_url)
    engine = make_engine(database_url)
    yield make_sessionmaker(engine)
    await engine.dispose()


def _updated(hub: EventHub, sid: int, status: str, **extra) -> None:
    hub.publish(simulation_updated(sid, status, **{"rounds": 3, "current_round": 0, **extra}))


def _round(hub: EventHub, sid: int, number: int, mean: float) -> None:
    hub.publish(round_completed(sid, number, rounds=3, mean=mean, duration_s=0.25))


async def _entries(sessions, sid: int, limit: int = 1000) -> list[timeline.Entry]:
    async with sessions() as session:
        entries, _ = await timeline.list_entries(session, sid, after=None, limit=limit)
    return entries


async def _wait_entries(sessions, sid: int, count: int) -> list[timeline.Entry]:
    # Bounded by the test timeout; the follower writes as soon as it reads.
    while len(entries := await _entries(sessions, sid)) < count:  # noqa: ASYNC110 (the store)
        await asyncio.sleep(0.02)
    return entries


@contextlib.asynccontextmanager
async def following(hub: EventHub, sessions, seen: list):
    recorder = RunTimeline(hub, sessions, on_entry=[seen.append])
    recorder.subscribe()
    task = asyncio.create_task(recorder.run_forever())
    try:
        yield recorder
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_runs_events_become_its_timeline_in_order(sessions):
    hub, seen = EventHub(), []
    live = hub.subscribe({"simulation:5"})
    async with following(hub, sessions, seen):
        _updated(hub, 5, "pending")
        _updated(hub, 5, "running")
        _round(hub, 5, 1, 41.5)
        _updated(hub, 5, "running", current_round=1)  # after each round: no entry
        hub.publish(
            SimulationFault(simulation_id=5, round=2, message="round 2: worker w:1 failed: gone")
        )
        _updated(hub, 5, "paused", current_round=1, pause_reason="paused by an operator")
        _updated(hub, 5, "running", current_round=1)
        _round(hub, 5, 2, 30.25)
        _updated(hub, 5, "cancelled", current_round=2, cancel_reason="wrong prompt")
        _round(hub, 6, 1, 10.0)  # another run's
        entries = await _wait_entries(sessions, 5, 8)
    assert [(e.kind, e.message) for e in entries] == [
        ("launched", "launched: 3 rounds"),
        ("started", "started"),
        ("round", "round 1 of 3 finished: mean 41.50, 0.2 s"),
        ("fault", "round 2: worker w:1 failed: gone"),
        ("paused", "paused: paused by an operator"),
        ("resumed", "resumed after round 1"),
        ("round", "round 2 of 3 finished: mean 30.25, 0.2 s"),
        ("cancelled", "cancelled: wrong prompt"),
    ]
    assert entries[2].round == 1 and entries[2].data["mean"] == 41.5
    assert entries[-1].data == {"reason": "wrong prompt"}
    assert [e.id for e in entries] == sorted(e.id for e in entries)
    assert {e.kind for e in seen} >= {"launched", "cancelled"}
    # Each stored entry went out live on the run's topic too.
    added = []
    while not live.queue.empty():
        message = live.queue.get_nowait()
        if '"timeline.added"' in message:
            added.append(message)
    assert len(added) == 8 and "wrong prompt" in added[-1]


async def test_pages_and_deletion_with_the_simulation(sessions):
    async with sessions() as session:
        simulation = await store.create_simulation(
            session,
            population_id=1,
            name="t",
            rounds=30,
            config={},
            seed=1,
            models=[],
            version="t",
        )
    sid = simulation.id
    hub, seen = EventHub(), []
    async with following(hub, sessions, seen):
        _updated(hub, sid, "pending")
        for number in range(1, 26):
            _round(hub, sid, number, float(number))
        await _wait_entries(sessions, sid, 26)
    pages, after = [], None
    async with sessions() as session:
        while True:
            page, after = await timeline.list_entries(session, sid, after=after, limit=10)
            pages.append(page)
            if after is None:
                break
    assert [len(p) for p in pages] == [10, 10, 6]
    assert [e.round for p in pages for e in p][1:] == list(range(1, 26))
    async with sessions() as session:
        await store.set_status(session, sid, "cancelled")
        await store.delete_simulation(session, sid)
    assert await _entries(sessions, sid) == []


async def test_a_follower_dropped_by_the_hub_catches_up_from_its_replay_buffer(
    sessions, monkeypatch
):
    monkeypatch.setattr(hub_module, "SUBSCRIBER_QUEUE_SIZE", 4)
    hub, seen = EventHub(), []
    recorder = RunTimeline(hub, sessions, on_entry=[seen.append])
    recorder.subscribe()
    _updated(hub, 9, "pending")
    for number in range(1, 11):  # more than its queue holds: the hub drops it
        _round(hub, 9, number, 50.0)
    assert recorder._subscription.overflowed.is_set()
    task = asyncio.create_task(recorder.run_forever())
    try:
        entries = await _wait_entries(sessions, 9, 11)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert [e.round for e in entries if e.kind == "round"] == list(range(1, 11))


async def test_a_restarted_manager_tells_a_resume_from_the_stored_timeline(sessions):
    hub = EventHub()
    async with following(hub, sessions, []):
        _updated(hub, 11, "pending")
        _updated(hub, 11, "running")
        _updated(hub, 11, "failed", error="round 1: boom")
        await _wait_entries(sessions, 11, 3)
    # A new follower (a restarted manager) knows nothing in memory: the store says "failed".
    async with following(EventHub(), sessions, []) as second:
        _updated(second.hub, 11, "running", current_round=1)
        _updated(second.hub, 11, "completed", current_round=3, stop_reason="converged")
        entries = await _wait_entries(sessions, 11, 5)
    assert [e.kind for e in entries] == ["launched", "started", "failed", "resumed", "completed"]
    assert entries[2].message == "failed: round 1: boom"
    assert entries[-1].message == "finished after 3 rounds (converged)"


def test_status_entries_only_on_a_change():
    def kind(status, before, **payload):
        entry = status_entry(simulation_updated(1, status, **payload), before, None)
        return entry and entry.kind

    assert kind("running", "running") is None
    assert kind("running", "pending") == "started"
    assert kind("running", "paused") == "resumed"
    assert kind("cancelled", "running") == "cancelled"
    reasonless = status_entry(simulation_updated(1, "cancelled"), "paused", None)
    assert reasonless.message == "cancelled (no reason given)"
