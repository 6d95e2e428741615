"""The worker store and its migrations, on SQLite and on Postgres."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, update

from backend.db.migrate import alembic_config, current, downgrade, upgrade
from backend.db.models import Worker
from backend.db.session import make_engine, make_sessionmaker
from backend.events.hub import EventHub
from backend.workers import registry
from backend.workers.schemas import HeartbeatRequest, RegisterRequest


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


@pytest.fixture
async def store(database_url):
    await asyncio.to_thread(upgrade, database_url)
    engine = make_engine(database_url)
    yield make_sessionmaker(engine), EventHub()
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


def beat(worker, lease: str | None = None) -> HeartbeatRequest:
    return HeartbeatRequest(
        agents=3, capacity=900, cpu_percent=12.5, rss_bytes=1 << 20, lease=lease or worker.lease
    )


async def test_register_heartbeat_and_events(store):
    sessions, hub = store
    sub = hub.subscribe({"cluster"})
    async with sessions() as s:
        worker = await registry.register(s, hub, _reg())
        beaten = await registry.heartbeat(s, hub, worker.id, beat(worker))
    assert beaten.state == "online"
    assert (beaten.agents, beaten.capacity, beaten.rss_bytes) == (3, 900, 1 << 20)
    assert beaten.last_heartbeat >= worker.registered_at
    seqs = [__import__("json").loads(sub.queue.get_nowait())["seq"] for _ in range(2)]
    assert seqs == sorted(seqs) and seqs[1] == seqs[0] + 1


async def test_removed_worker_is_never_revived_by_a_heartbeat(store):
    sessions, hub = store
    async with sessions() as s:
        worker = await registry.register(s, hub, _reg())
        await registry.remove(s, hub, worker.id)
        with pytest.raises(registry.WorkerRemoved):
            await registry.heartbeat(s, hub, worker.id, beat(worker))
        with pytest.raises(registry.UnknownWorker):
            await registry.heartbeat(s, hub, worker.id + 999, beat(worker))
    async with sessions() as s:
        assert (await registry.get(s, worker.id)).state == "removed"


async def test_concurrent_heartbeats_and_remove_end_removed(store):
    sessions, hub = store
    async with sessions() as s:
        worker = await registry.register(s, hub, _reg())

    async def beat_once():
        async with sessions() as s:
            try:
                await registry.heartbeat(s, hub, worker.id, beat(worker))
            except registry.WorkerRemoved:
                pass

    async def remove():
        async with sessions() as s:
            await registry.remove(s, hub, worker.id)

    await asyncio.gather(
        *[beat_once() for _ in range(10)], remove(), *[beat_once() for _ in range(10)]
    )
    async with sessions() as s:
        assert (await registry.get(s, worker.id)).state == "removed"


async def test_silent_worker_goes_offline_and_returns_on_heartbeat(store):
    sessions, hub = store
    async with sessions() as s:
        quiet = await registry.register(s, hub, _reg(0))
        lively = await registry.register(s, hub, _reg(1))
        # Age one worker's heartbeat past the TTL.
        await s.execute(
            update(Worker)
            .where(Worker.id == quiet.id)
            .values(last_heartbeat=registry.utcnow() - timedelta(seconds=10))
        )
        await s.commit()
        gone = await registry.mark_silent_offline(s, hub, ttl_s=3.0)
        assert [w.id for w in gone] == [quiet.id]
        assert (await registry.get(s, lively.id)).state == "online"
        assert (await registry.heartbeat(s, hub, quiet.id, beat(quiet))).state == "online"


async def test_a_restarted_managers_grace_spares_workers_registered_before_it(store):
    sessions, hub = store
    async with sessions() as s:
        before = await registry.register(s, hub, _reg(0))
        await s.execute(
            update(Worker).values(last_heartbeat=registry.utcnow() - timedelta(seconds=10))
        )
        await s.commit()
        started = registry.utcnow()
        after = await registry.register(s, hub, _reg(1))
        await s.execute(
            update(Worker)
            .where(Worker.id == after.id)
            .values(last_heartbeat=registry.utcnow() - timedelta(seconds=10))
        )
        await s.commit()
        # During the grace only the worker that registered since the start is judged.
        gone = await registry.mark_silent_offline(s, hub, 3.0, spare_registered_before=started)
        assert [w.id for w in gone] == [after.id]
        assert (await registry.get(s, before.id)).state == "online"
        assert await registry.grant_grace(s) == 1
        assert (await registry.get(s, before.id)).last_heartbeat >= started
        assert await registry.mark_silent_offline(s, hub, 3.0) == []


async def test_a_restarted_process_takes_its_identity_back(store):
    sessions, hub = store
    async with sessions() as s:
        first = await registry.register(s, hub, _reg(0).model_copy(update={"slot": 2}))
        first_id, old_lease = first.id, first.lease
        holder = await registry.holder_of_identity(s, "node-a", 2)
        assert holder.id == first_id
        again = await registry.register(
            s, hub, _reg(5).model_copy(update={"slot": 2}), reuse=holder
        )
        assert again.id == first_id and again.lease != old_lease
        assert again.address == "127.0.0.1:5005" and again.pid == 105
        # The old process's lease no longer beats (the route answers 409: register again).
        with pytest.raises(registry.LeaseSuperseded):
            await registry.heartbeat(s, hub, first_id, beat(again, lease=old_lease))
        # Removed, the identity starts a new worker.
        await registry.remove(s, hub, first_id)
        assert await registry.holder_of_identity(s, "node-a", 2) is None


async def test_drain_survives_going_offline(store):
    sessions, hub = store
    async with sessions() as s:
        worker = await registry.register(s, hub, _reg())
        assert (await registry.drain(s, hub, worker.id)).state == "draining"
        await s.execute(
            update(Worker)
            .where(Worker.id == worker.id)
            .values(last_heartbeat=registry.utcnow() - timedelta(seconds=10))
        )
        await s.commit()
        await registry.mark_silent_offline(s, hub, ttl_s=3.0)
        assert (await registry.get(s, worker.id)).state == "offline"
        assert (await registry.heartbeat(s, hub, worker.id, beat(worker))).state == "draining"
        await registry.remove(s, hub, worker.id)
        with pytest.raises(registry.WorkerRemoved):
            await registry.drain(s, hub, worker.id)


async def test_keyset_pages_are_complete_and_skip_removed(store):
    sessions, hub = store
    async with sessions() as s:
        ids = [(await registry.register(s, hub, _reg(i))).id for i in range(7)]
        await registry.remove(s, hub, ids[3])
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
    sessions, hub = store
    async with sessions() as s:
        current = await registry.register(s, hub, _reg(0))
        stale_lease = "lease-from-a-previous-manager"
        with pytest.raises(registry.LeaseSuperseded):
            await registry.heartbeat(s, hub, current.id, beat(current, stale_lease))
        with pytest.raises(registry.UnknownWorker):  # the route answers 204 and removes nothing
            await registry.remove(s, hub, current.id, lease=stale_lease)
        assert (await registry.get(s, current.id)).state == "online"
        await registry.remove(s, hub, current.id, lease=current.lease)
        assert (await registry.get(s, current.id)).state == "removed"
