"""The worker store and its migrations, on SQLite and on Postgres."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import inspect
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import async_sessionmaker

from backend.db.migrate import alembic_config, current, downgrade, upgrade
from backend.db.session import make_engine, make_sessionmaker
from backend.events.hub import EventHub
from backend.workers import registry
from backend.workers.liveness import Liveness
from backend.workers.schemas import HeartbeatRequest, RegisterRequest, WorkerOut


def _tables(url: str) -> set[str]:
    async def read():
        engine = make_engine(url)
        async with engine.connect() as conn:
            names = await conn.run_sync(lambda c: set(inspect(c).get_table_names()))
        await engine.dispose()
        return names

    return asyncio.run(read())


def test_upgrade_then_downgrade_base(database_url):
    upgrade(database_url)
    head = ScriptDirectory.from_config(alembic_config(database_url)).get_current_head()
    assert head is not None and current(database_url) == head
    tables = {"workers", "populations", "agents", "simulations", "rounds", "decisions"}
    assert tables | {"alembic_version"} <= _tables(database_url)
    downgrade(database_url, "base")
    assert current(database_url) is None
    assert not tables & _tables(database_url)
    upgrade(database_url)  # and back up again: downgrade left nothing that blocks a re-run
    assert current(database_url) == head


class Clock:
    """The liveness book's monotonic clock, moved by the test: no sleeping, no timing."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Store:
    sessions: async_sessionmaker
    hub: EventHub
    liveness: Liveness
    clock: Clock

    def book(self, **overrides) -> Liveness:
        """Another liveness book on the same store and hub (a restarted manager's)."""
        options = dict(
            heartbeat_interval_s=1.0,
            ttl_s=3.0,
            max_beats_per_s=100.0,
            flush_s=2.0,
            sweep_s=0.5,
            clock=self.clock,
        )
        return Liveness(self.hub, **(options | overrides))


@pytest.fixture
async def store(database_url):
    await asyncio.to_thread(upgrade, database_url)
    engine = make_engine(database_url)
    hub, clock = EventHub(), Clock()
    made = Store(make_sessionmaker(engine), hub, None, clock)  # type: ignore[arg-type]
    made.liveness = made.book()
    yield made
    await engine.dispose()


def _reg(n: int = 0) -> RegisterRequest:
    return RegisterRequest(
        node="node-a",
        address=f"127.0.0.1:{5000 + n}",
        pid=100 + n,
        capacity=1000,
        version="t",
        rpc_secret="secret-of-test-worker",
    )


def beat(worker, lease: str | None = None, agents: int = 3) -> HeartbeatRequest:
    return HeartbeatRequest(
        agents=agents,
        capacity=900,
        cpu_percent=12.5,
        rss_bytes=1 << 20,
        lease=lease or worker.lease,
    )


def drain_events(sub) -> list[dict]:
    events = []
    while not sub.queue.empty():
        events.append(json.loads(sub.queue.get_nowait()))
    return events


async def test_beats_are_kept_in_memory_and_written_in_one_flush(store):
    sub = store.hub.subscribe({"cluster"})
    live = store.liveness
    async with store.sessions() as s:
        workers = [await registry.register(s, live, _reg(i)) for i in range(3)]
    registered = drain_events(sub)
    assert [e["type"] for e in registered] == ["worker.updated"] * 3
    for n, worker in enumerate(workers):
        assert await live.heartbeat(store.sessions, worker.id, beat(worker, agents=n)) == "online"
    # Beats produce no event and no write of their own...
    assert drain_events(sub) == []
    async with store.sessions() as s:
        assert (await registry.get(s, workers[2].id)).agents == 0
    # ...but the API's view is fresh before the flush.
    fresh = live.freshen(WorkerOut.model_validate(workers[2]))
    assert fresh.agents == 2 and fresh.last_heartbeat >= workers[2].registered_at
    async with store.sessions() as s:
        assert await live.flush(s) == 3
        stored = [await registry.get(s, w.id) for w in workers]
    assert [w.agents for w in stored] == [0, 1, 2]
    assert all(w.capacity == 900 and w.rss_bytes == 1 << 20 for w in stored)
    (batch,) = drain_events(sub)
    assert batch["type"] == "workers.updated"
    assert [(w["id"], w["agents"]) for w in batch["payload"]["workers"]] == [
        (w.id, n) for n, w in enumerate(workers)
    ]
    async with store.sessions() as s:
        assert await live.flush(s) == 0  # nothing beat since
    assert drain_events(sub) == []


async def test_removed_worker_is_never_revived_by_a_heartbeat(store):
    live = store.liveness
    async with store.sessions() as s:
        worker = await registry.register(s, live, _reg())
        await registry.remove(s, live, worker.id)
    with pytest.raises(registry.WorkerRemoved):
        await live.heartbeat(store.sessions, worker.id, beat(worker))
    with pytest.raises(registry.UnknownWorker):
        await live.heartbeat(store.sessions, worker.id + 999, beat(worker))
    async with store.sessions() as s:
        assert await live.flush(s) == 0
        assert (await registry.get(s, worker.id)).state == "removed"


async def test_concurrent_heartbeats_flushes_and_remove_end_removed(store):
    live = store.liveness
    async with store.sessions() as s:
        worker = await registry.register(s, live, _reg())

    async def beat_once():
        try:
            await live.heartbeat(store.sessions, worker.id, beat(worker))
        except registry.WorkerRemoved:
            pass

    async def flush():
        async with store.sessions() as s:
            await live.flush(s)

    async def remove():
        async with store.sessions() as s:
            await registry.remove(s, live, worker.id)

    await asyncio.gather(
        *[beat_once() for _ in range(10)],
        flush(),
        remove(),
        flush(),
        *[beat_once() for _ in range(10)],
    )
    async with store.sessions() as s:
        await live.flush(s)
        assert (await registry.get(s, worker.id)).state == "removed"
    assert not live.is_live(worker.id)


async def test_silent_worker_goes_offline_and_returns_on_heartbeat(store):
    live, clock = store.liveness, store.clock
    sub = store.hub.subscribe({"cluster"})
    async with store.sessions() as s:
        quiet = await registry.register(s, live, _reg(0))
        lively = await registry.register(s, live, _reg(1))
    await live.heartbeat(store.sessions, quiet.id, beat(quiet, agents=7))
    clock.now += 2.0
    await live.heartbeat(store.sessions, lively.id, beat(lively))
    clock.now += 1.5  # quiet's last beat is 3.5 s old (TTL 3), lively's 1.5 s
    drain_events(sub)
    async with store.sessions() as s:
        gone = await live.sweep(s)
        assert [w.id for w in gone] == [quiet.id]
        offline = await registry.get(s, quiet.id)
        # Offline with what it reported last, though no flush ran.
        assert (offline.state, offline.agents) == ("offline", 7)
        assert (await registry.get(s, lively.id)).state == "online"
    (event,) = drain_events(sub)
    assert event["payload"]["worker"]["state"] == "offline"
    assert not live.is_live(quiet.id) and live.is_live(lively.id)
    # Its next beat goes through the store and brings it back.
    assert await live.heartbeat(store.sessions, quiet.id, beat(quiet)) == "online"
    assert live.is_live(quiet.id)
    (event,) = drain_events(sub)
    assert event["payload"]["worker"]["state"] == "online"


async def test_a_sweep_the_store_refuses_keeps_the_worker_for_the_next_sweep(store, tmp_path):
    async with store.sessions() as s:
        worker = await registry.register(s, store.liveness, _reg(0))
    store.clock.now += 10.0
    # A store that cannot be written (its directory does not exist): the mark is not made.
    broken = make_engine(f"sqlite+aiosqlite:///{tmp_path}/missing/populace.db")
    with pytest.raises(OperationalError):
        async with make_sessionmaker(broken)() as s:
            await store.liveness.sweep(s)
    await broken.dispose()
    async with store.sessions() as s:
        assert (await registry.get(s, worker.id)).state == "online"
        assert [w.id for w in await store.liveness.sweep(s)] == [worker.id]
        assert (await registry.get(s, worker.id)).state == "offline"


async def test_a_restarted_managers_book_spares_live_workers_for_the_grace(store):
    async with store.sessions() as s:
        before = await registry.register(s, store.liveness, _reg(0))
    # A new manager: its book starts from the store, with a 12 s grace.
    restarted = store.book(startup_grace_s=12.0)
    store.clock.now += 60.0  # the manager was down a minute
    async with store.sessions() as s:
        assert await restarted.load(s) == 1
        assert (await registry.get(s, before.id)).last_heartbeat >= before.registered_at
        store.clock.now += 5.0  # past the TTL, within the grace
        assert await restarted.sweep(s) == []
        after = await registry.register(s, restarted, _reg(1))
        store.clock.now += 3.5  # past the newcomer's TTL; the grace still spares `before`
        assert [w.id for w in await restarted.sweep(s)] == [after.id]
        store.clock.now += 4.0  # the grace is over
        assert [w.id for w in await restarted.sweep(s)] == [before.id]


async def test_the_cadence_grows_with_the_fleet(store):
    """Dask-like: at most max_beats_per_s beats a second in all; the TTL stretches alike, and
    a worker told the longer interval is not judged by the shorter TTL."""
    live = store.book(max_beats_per_s=2.0)
    async with store.sessions() as s:
        workers = [await registry.register(s, live, _reg(i)) for i in range(5)]
    cadence = live.cadence()
    assert (cadence.heartbeat_interval_s, cadence.ttl_s) == (2.5, 7.5)
    for worker in workers:  # the first ones registered to a smaller fleet: they learn it now
        await live.heartbeat(store.sessions, worker.id, beat(worker))
    store.clock.now += 5.0  # silent longer than the base TTL (3 s), shorter than 7.5 s
    async with store.sessions() as s:
        assert await live.sweep(s) == []
        for worker in workers[1:]:
            await registry.remove(s, live, worker.id)
    assert live.cadence().heartbeat_interval_s == 1.0  # one worker left: the base cadence
    store.clock.now += 2.0
    async with store.sessions() as s:
        # Told 2.5 s at its last beat, the worker still has until 7.5 s after it.
        assert await live.sweep(s) == []
        store.clock.now += 1.0
        assert [w.id for w in await live.sweep(s)] == [workers[0].id]


async def test_a_restarted_process_takes_its_identity_back(store):
    live = store.liveness
    async with store.sessions() as s:
        first = await registry.register(s, live, _reg(0).model_copy(update={"slot": 2}))
        first_id, old_lease = first.id, first.lease
        holder = await registry.holder_of_identity(s, "node-a", 2)
        assert holder.id == first_id
        again = await registry.register(
            s, live, _reg(5).model_copy(update={"slot": 2}), reuse=holder
        )
        assert again.id == first_id and again.lease != old_lease
        assert again.address == "127.0.0.1:5005" and again.pid == 105
    # The old process's lease no longer beats (the route answers 409: register again).
    with pytest.raises(registry.LeaseSuperseded):
        await live.heartbeat(store.sessions, first_id, beat(again, lease=old_lease))
    async with store.sessions() as s:
        # Removed, the identity starts a new worker.
        await registry.remove(s, live, first_id)
        assert await registry.holder_of_identity(s, "node-a", 2) is None


async def test_drain_survives_going_offline(store):
    live = store.liveness
    async with store.sessions() as s:
        worker = await registry.register(s, live, _reg())
        assert (await registry.drain(s, live, worker.id)).state == "draining"
    assert await live.heartbeat(store.sessions, worker.id, beat(worker)) == "draining"
    store.clock.now += 10.0
    async with store.sessions() as s:
        assert [w.id for w in await live.sweep(s)] == [worker.id]
        assert (await registry.get(s, worker.id)).state == "offline"
    assert await live.heartbeat(store.sessions, worker.id, beat(worker)) == "draining"
    async with store.sessions() as s:
        await registry.remove(s, live, worker.id)
        with pytest.raises(registry.WorkerRemoved):
            await registry.drain(s, live, worker.id)


async def test_keyset_pages_are_complete_and_skip_removed(store):
    async with store.sessions() as s:
        ids = [(await registry.register(s, store.liveness, _reg(i))).id for i in range(7)]
        await registry.remove(s, store.liveness, ids[3])
        seen, after = [], None
        while True:
            rows, after = await registry.page(s, after=after, limit=2, state=None)
            seen += [w.id for w in rows]
            if after is None:
                break
        assert seen == [i for i in ids if i != ids[3]]
        removed, _ = await registry.page(s, after=None, limit=10, state="removed")
        assert [w.id for w in removed] == [ids[3]]


async def test_a_stale_lease_cannot_beat_or_deregister_another_registration(store):
    """A fresh store reuses ids: a worker still holding id N from before must not pass for
    the process that registered as N now."""
    live = store.liveness
    async with store.sessions() as s:
        current = await registry.register(s, live, _reg(0))
    stale_lease = "lease-from-a-previous-manager"
    with pytest.raises(registry.LeaseSuperseded):
        await live.heartbeat(store.sessions, current.id, beat(current, stale_lease))
    async with store.sessions() as s:
        with pytest.raises(registry.UnknownWorker):  # the route answers 204 and removes nothing
            await registry.remove(s, live, current.id, lease=stale_lease)
        assert (await registry.get(s, current.id)).state == "online"
        await registry.remove(s, live, current.id, lease=current.lease)
        assert (await registry.get(s, current.id)).state == "removed"
