"""The write fence refuses writes and commits of a stopping manager, leaving nothing pending on
the connection; the SQLite lease lets one manager at a time hold a database (issue 26, item 2)."""

from __future__ import annotations

import asyncio
import os

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

from backend.db.lease import FileLease, lease_for
from backend.db.write_fence import ManagerNotActive, WriteFence, is_write
from backend.shutdown import Shutdown, describe_task


@pytest.fixture
async def fenced(tmp_path):
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path}/fence.db")
    fence = WriteFence()
    fence.attach(engine)
    async with engine.begin() as conn:
        await conn.execute(text("CREATE TABLE t (x INTEGER)"))
    yield fence, async_sessionmaker(engine)
    await engine.dispose()


async def _count(sessionmaker) -> int:
    async with sessionmaker() as session:
        return (await session.execute(text("SELECT count(*) FROM t"))).scalar_one()


async def test_a_closed_fence_refuses_writes_and_lets_reads_through(fenced):
    fence, sessionmaker = fenced
    fence.close("the manager is stopping")
    async with sessionmaker() as session:
        with pytest.raises(ManagerNotActive, match="the manager is stopping"):
            await session.execute(text("INSERT INTO t VALUES (1)"))
    assert await _count(sessionmaker) == 0
    fence.open()
    async with sessionmaker() as session:
        await session.execute(text("INSERT INTO t VALUES (1)"))
        await session.commit()
    assert await _count(sessionmaker) == 1


async def test_a_change_waits_for_a_lease_taken_again_but_not_for_a_stopping_manager():
    fence = WriteFence()
    fence.close("the database lease is lost")
    waiting = asyncio.create_task(fence.wait_open(60))
    await asyncio.sleep(0)
    assert not waiting.done()
    fence.open()  # the lease watch took it again
    await asyncio.wait_for(waiting, 5)
    assert not fence.closed

    # Stopping closes it for good: nothing waits, the reason says so, and a lease taken again
    # by the still-running watch does not open it.
    fence.close("the database lease is lost")
    fence.close("the manager is stopping", final=True)
    await asyncio.wait_for(fence.wait_open(60), 5)
    fence.open()
    assert fence.closed and fence.reason == "the manager is stopping"
    with pytest.raises(ManagerNotActive, match="stopping"):
        fence.check()


async def test_a_fence_closed_mid_transaction_refuses_its_commit_and_keeps_nothing(fenced):
    fence, sessionmaker = fenced
    async with sessionmaker() as session:
        await session.execute(text("INSERT INTO t VALUES (1)"))
        fence.close("the database lease is lost")
        with pytest.raises(ManagerNotActive):
            await session.commit()
    # The refused write is not left pending on the pooled connection for a later commit.
    fence.open()
    async with sessionmaker() as session:
        await session.execute(text("INSERT INTO t VALUES (2)"))
        await session.commit()
    assert await _count(sessionmaker) == 1


def test_writes_are_told_from_reads():
    assert is_write("UPDATE workers SET state = 'offline'")
    assert is_write("  insert into t values (1)")
    assert is_write("WITH moved AS (UPDATE agents SET worker_id = 1) SELECT 1")
    assert not is_write("SELECT * FROM workers FOR UPDATE")
    assert not is_write("WITH x AS (SELECT 1) SELECT * FROM x")


async def test_one_sqlite_lease_holder_at_a_time(tmp_path):
    url = f"sqlite+aiosqlite:///{tmp_path}/populace.db"
    first, second = lease_for(url), lease_for(url)
    assert isinstance(first, FileLease)
    assert await first.try_acquire()
    assert not await second.try_acquire()
    assert f"pid {os.getpid()}" in await second.holder()
    stop = asyncio.Event()
    waiting = asyncio.create_task(second.acquire(stop, poll_s=0.01))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    await first.release()
    assert await asyncio.wait_for(waiting, 10)
    await second.release()
    # A waiting manager told to stop gives up at once.
    held = lease_for(url)
    assert await held.try_acquire()
    stop.set()
    assert not await lease_for(url).acquire(stop, poll_s=10)
    await held.release()


def test_no_lease_for_an_in_memory_database():
    assert not isinstance(lease_for("sqlite+aiosqlite://"), FileLease)
    assert not isinstance(lease_for("sqlite+aiosqlite:///:memory:"), FileLease)


async def test_a_hung_task_is_named_with_where_it_waits():
    async def stuck_in_our_code():
        await asyncio.Event().wait()

    task = asyncio.create_task(stuck_in_our_code(), name="liveness sweep")
    await asyncio.sleep(0)
    text_ = describe_task(task)
    assert text_.startswith("liveness sweep (")
    assert "test_write_fence_and_lease.py" in text_ and "stuck_in_our_code" in text_
    task.cancel()
    shutdown = Shutdown(timeout_s=5)
    assert shutdown.remaining() == 5
