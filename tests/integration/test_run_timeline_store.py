"""The run timeline as an outbox, on SQLite and on Postgres: each change of a run writes its
entry in its own transaction (none without the change, none lost with the hub), the announcer
sends each stored entry out once it is committed (again after a restart if it was not), pages,
and deletion with the run."""

from __future__ import annotations

import asyncio
import contextlib

import numpy as np
import pytest
from sqlalchemy import inspect, select, text

from backend.db.migrate import current, downgrade, upgrade
from backend.db.models import RunEvent, Simulation
from backend.db.session import make_engine, make_sessionmaker
from backend.db.times import utcnow
from backend.events import hub as hub_module
from backend.events.hub import EventHub
from backend.simulations import store, timeline
from backend.simulations.outcome import DecisionTable, RoundOutcome
from backend.simulations.timeline import FaultLog, RunTimeline, status_entry
from tests.support_events import simulation_updated


async def _columns(url: str, table: str) -> set[str]:
    engine = make_engine(url)
    async with engine.connect() as conn:
        names = await conn.run_sync(
            lambda c: (
                {col["name"] for col in inspect(c).get_columns(table)}
                if inspect(c).has_table(table)
                else set()
            )
        )
    await engine.dispose()
    return names


async def test_migration_0011_up_down_up(database_url):
    await asyncio.to_thread(upgrade, database_url, "0011_run_events")
    assert await _columns(database_url, "run_events")
    await asyncio.to_thread(downgrade, database_url, "0010_workbench")
    assert not await _columns(database_url, "run_events")
    assert await asyncio.to_thread(current, database_url) == "0010_workbench"
    await asyncio.to_thread(upgrade, database_url, "0011_run_events")
    assert await _columns(database_url, "run_events")


async def test_migration_0023_marks_stored_entries_announced(database_url):
    await asyncio.to_thread(upgrade, database_url, "0022_placements_by_range")
    assert "published" not in await _columns(database_url, "run_events")
    engine = make_engine(database_url)
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO run_events (simulation_id, kind, message, data, created_at) "
                "VALUES (1, 'launched', 'launched: 3 rounds', '{}', :at)"
            ),
            {"at": utcnow()},
        )
    await asyncio.to_thread(upgrade, database_url, "0023_timeline_outbox")
    async with engine.connect() as conn:
        published = (await conn.execute(select(RunEvent.published))).scalars().all()
    await engine.dispose()
    assert published == [True]  # the timeline that wrote it announced it
    await asyncio.to_thread(downgrade, database_url, "0022_placements_by_range")
    assert "published" not in await _columns(database_url, "run_events")
    await asyncio.to_thread(upgrade, database_url)


@pytest.fixture
async def sessions(database_url):
    await asyncio.to_thread(upgrade, database_url)
    engine = make_engine(database_url)
    yield make_sessionmaker(engine)
    await engine.dispose()


async def _create(sessions, rounds: int = 3) -> int:
    async with sessions() as session:
        simulation = await store.create_simulation(
            session, population_id=1, name="t", rounds=rounds, config={}, seed=1, models=[],
            version="t",
        )  # fmt: skip
    return simulation.id


async def _status(sessions, sid: int, status: str, **fields) -> None:
    async with sessions() as session:
        assert await store.set_status(session, sid, status, **fields) is not None


def _kept(number: int, mean: float | None, endpoints: list[dict] | None = None):
    """A round of two agents, as the runner keeps it."""
    table = DecisionTable(
        np.array([1, 2], np.int64), np.array([mean or 0.0] * 2), np.zeros(2, np.uint8), None
    )
    result = RoundOutcome(
        round=number, n_valid=2, n_invalid=0, n_late=0, n_lost=0, mean=mean, median=mean,
        std=0.0, min=mean, max=mean, target=None, winner_value=None, winner_count=0,
        winner_agents=[], histogram=[2], segments={}, prompt_tokens=0, cached_prompt_tokens=0,
        completion_tokens=0, llm_errors=0, llm_requests=0, network_bytes=0, duration_s=0.25,
        endpoints=endpoints or [],
    )  # fmt: skip
    return result, table


async def _round(sessions, sid: int, number: int, mean: float | None, **extra) -> None:
    async with sessions() as session:
        await store.save_round(session, sid, *_kept(number, mean, **extra))


async def _entries(sessions, sid: int, limit: int = 1000) -> list[timeline.Entry]:
    async with sessions() as session:
        entries, _ = await timeline.list_entries(session, sid, after=None, limit=limit)
    return entries


async def _unannounced(sessions) -> int:
    async with sessions() as session:
        rows = await session.scalars(select(RunEvent.id).where(RunEvent.published.is_(False)))
        return len(list(rows))


@contextlib.asynccontextmanager
async def announcing(hub: EventHub, sessions, seen: list):
    announcer = RunTimeline(hub, sessions, on_entry=[seen.append], poll_s=0.05)
    announcer.subscribe()
    task = asyncio.create_task(announcer.run_forever())
    try:
        yield announcer
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _wait_announced(sessions, seen: list, count: int) -> None:
    # Bounded by the test timeout; the announcer looks every 50 ms.
    while len(seen) < count or await _unannounced(sessions):  # noqa: ASYNC110 (the store)
        await asyncio.sleep(0.02)


async def test_a_runs_changes_write_its_timeline_in_order(sessions):
    sid = await _create(sessions)
    await _status(sessions, sid, "running")
    await _round(sessions, sid, 1, 41.5)
    await _status(sessions, sid, "running")  # after each round: no entry
    faults = FaultLog(sessions)
    faults.add(sid, 2, "round 2: worker w:1 failed: gone")
    while await _unannounced(sessions) < 4:  # noqa: ASYNC110 (written by its own task)
        await asyncio.sleep(0.01)
    await _status(sessions, sid, "paused", pause_reason="paused by an operator")
    async with sessions() as session:
        assert await store.reactivate(session, sid) is not None
    await _round(sessions, sid, 2, 30.25)
    async with sessions() as session:
        await store.set_cancel_reason(session, sid, "wrong prompt")
    await _status(sessions, sid, "cancelled")
    # Written with the changes, before anyone announces them: no hub was involved.
    entries = await _entries(sessions, sid)
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

    hub, seen = EventHub(), []
    live = hub.subscribe({f"simulation:{sid}"})
    async with announcing(hub, sessions, seen):
        await _wait_announced(sessions, seen, 8)
    assert [e.id for e in seen] == [e.id for e in entries]  # each once, in order
    added = []
    while not live.queue.empty():
        message = live.queue.get_nowait()
        if '"timeline.added"' in message:
            added.append(message)
    assert len(added) == 8 and "wrong prompt" in added[-1]


async def test_a_change_that_does_not_commit_leaves_no_entry(sessions):
    sid = await _create(sessions)
    async with sessions() as session:
        await store.set_status(session, sid, "running")
        await store.set_status(session, sid, "completed")
    # A final status is never left: no change, no entry.
    async with sessions() as session:
        assert await store.set_status(session, sid, "running") is None
    # A round kept twice (a retry after a lost answer) is one round on the timeline.
    await _round(sessions, sid, 1, 5.0)
    await _round(sessions, sid, 1, 5.0)
    kinds = [e.kind for e in await _entries(sessions, sid)]
    assert kinds == ["launched", "started", "completed", "round"]
    # Another population's run refused as busy writes nothing either.
    other = await _create(sessions)
    with pytest.raises(store.PopulationBusy):
        await _create(sessions)
    assert [e.kind for e in await _entries(sessions, other)] == ["launched"]
    async with sessions() as session:
        count = len(list(await session.scalars(select(RunEvent.id))))
    assert count == 5


async def test_breaker_changes_are_faults_of_their_round(sessions):
    sid = await _create(sessions)
    meter = {
        "base_url": "http://llm:8000/v1", "model": "m", "breaker_opened": 1,
        "breaker_half_opened": 0, "breaker_closed": 1, "requests": 9, "errors": 4,
        "skipped": 3, "last_error": "HTTP 503",
    }  # fmt: skip
    await _round(sessions, sid, 1, 10.0, endpoints=[meter, {**meter, "breaker_opened": 0,
                                                             "breaker_closed": 0}])  # fmt: skip
    round_, fault = (await _entries(sessions, sid))[1:]
    assert round_.kind == "round" and fault.kind == "fault" and fault.round == 1
    assert fault.message == (
        "round 1: LLM endpoint http://llm:8000/v1 (model 'm'): circuit breaker opened once, "
        "closed once; 3 requests skipped, not sent; last error: HTTP 503"
    )
    assert fault.data["cause"] == "llm_breaker" and fault.data["opened"] == 1


async def test_pages_and_deletion_with_the_simulation(sessions):
    sid = await _create(sessions, rounds=30)
    for number in range(1, 26):
        await _round(sessions, sid, number, float(number))
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


async def test_the_hub_dropping_the_announcer_loses_no_entry(sessions, monkeypatch):
    monkeypatch.setattr(hub_module, "SUBSCRIBER_QUEUE_SIZE", 4)
    hub, seen = EventHub(), []
    sid = await _create(sessions, rounds=10)
    announcer = RunTimeline(hub, sessions, on_entry=[seen.append], poll_s=0.05)
    announcer.subscribe()
    for number in range(1, 11):  # more cues than its queue holds: the hub drops it
        await _round(sessions, sid, number, 50.0)
        hub.publish(simulation_updated(sid, "running", current_round=number))
    assert announcer._subscription.overflowed.is_set()
    task = asyncio.create_task(announcer.run_forever())
    try:
        await _wait_announced(sessions, seen, 11)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert [e.round for e in seen if e.kind == "round"] == list(range(1, 11))


async def test_a_restarted_manager_announces_what_the_last_one_did_not(sessions):
    sid = await _create(sessions)
    await _status(sessions, sid, "running")
    await _status(sessions, sid, "failed", error="round 1: boom")
    # The first manager announced nothing before it stopped; the next one announces it all.
    seen: list = []
    async with announcing(EventHub(), sessions, seen):
        await _wait_announced(sessions, seen, 3)
    # A resume is told from a start by the stored timeline, not by a memory of it.
    async with sessions() as session:
        assert await store.reactivate(session, sid) is not None
    await _status(sessions, sid, "completed", stop_reason="converged")
    async with announcing(EventHub(), sessions, seen):
        await _wait_announced(sessions, seen, 5)
    assert [e.kind for e in seen] == ["launched", "started", "failed", "resumed", "completed"]
    assert seen[2].message == "failed: round 1: boom"
    assert seen[-1].message == "finished after 0 rounds (converged)"


async def test_a_fault_told_while_the_store_is_down_is_written_when_it_answers(sessions):
    sid = await _create(sessions)
    down = asyncio.Event()

    class Flaky:
        """The store refuses the first two transactions."""

        calls = 0

        def __call__(self):
            Flaky.calls += 1
            if Flaky.calls <= 2:
                down.set()
                raise ConnectionError("the database is unreachable")
            return sessions()

    faults = FaultLog(Flaky())
    faults.add(sid, 1, "the database is unreachable; retrying for up to 60 s")
    faults.add(sid, 1, "round 1: worker w:2 failed: gone")
    await down.wait()
    while len(await _entries(sessions, sid)) < 3:  # noqa: ASYNC110 (written by its own task)
        await asyncio.sleep(0.05)
    assert [e.message for e in await _entries(sessions, sid)][1:] == [
        "the database is unreachable; retrying for up to 60 s",
        "round 1: worker w:2 failed: gone",
    ]


def test_status_entries_only_on_a_change():
    def run(status, **fields):
        return Simulation(id=1, status=status, rounds=3, current_round=0, **fields)

    def kind(status, before, **fields):
        entry = status_entry(run(status, **fields), before, utcnow())
        return entry and entry.kind

    assert kind("running", "running") is None
    assert kind("running", "pending") == "started"
    assert kind("running", "paused") == "resumed"
    assert kind("cancelled", "running") == "cancelled"
    reasonless = status_entry(run("cancelled"), "paused", utcnow())
    assert reasonless.message == "cancelled (no reason given)"
