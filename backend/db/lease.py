"""The manager lease: one active manager per database.

Two managers on one database would both run the liveness sweep, the placement keeper and the
runs: one marks offline the workers that beat the other (split brain). So a manager takes the
lease before it touches the database (migrations included) and holds it while it runs:

- Postgres: a session-level advisory lock on a connection of its own. The server drops it when
  that connection ends (the process died, or the connection was cut), so a killed manager never
  leaves it behind. The holder checks the connection every `check_s`: a lost connection closes
  the write fence at once; the lock is then taken again on a new connection, or, when another
  manager took it meanwhile, this one stops.
- SQLite: an exclusive `flock` on `<database file>.manager-lock`, which the kernel drops with
  the process. (An in-memory database is one process's own: no lease.)

A manager that finds the lease taken waits for it, before it opens its port, and says every
`WAIT_LOG_S` seconds who holds it. No table: nothing to migrate, nothing to clean up.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine
from sqlalchemy.pool import NullPool

log = logging.getLogger(__name__)

# pg_advisory_lock(int4, int4) keys: "popu" and the manager lease. Per database, so managers of
# other databases on the same server never wait for each other.
PG_LOCK_KEYS = (0x706F7075, 1)
# A standby says who it waits for this often.
WAIT_LOG_S = 10.0
# A check of the lease connection that takes longer than this counts as lost.
CHECK_TIMEOUT_S = 5.0


def describe_self() -> str:
    return f"populace manager pid {os.getpid()} on {socket.gethostname()}"[:63]


class Lease:
    """No lease (an in-memory database): always held."""

    async def try_acquire(self) -> bool:
        return True

    async def holder(self) -> str:
        return "another manager"

    async def still_held(self) -> bool:
        return True

    async def release(self) -> None:
        return None

    async def acquire(self, stopping: asyncio.Event, poll_s: float) -> bool:
        """Wait for the lease; False when `stopping` is set first."""
        said_at = float("-inf")
        while not stopping.is_set():
            if await self.try_acquire():
                return True
            if time.monotonic() - said_at >= WAIT_LOG_S:
                said_at = time.monotonic()
                log.warning(
                    "waiting for the database lease held by %s: one manager acts on a database "
                    "at a time; this one starts when it is released",
                    await self.holder(),
                )
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), poll_s)
        return False


class PostgresLease(Lease):
    def __init__(self, database_url: str) -> None:
        self._engine = create_async_engine(
            database_url,
            poolclass=NullPool,
            connect_args={"server_settings": {"application_name": describe_self()}},
        )
        self._conn: AsyncConnection | None = None

    async def _connect(self) -> AsyncConnection:
        conn = await self._engine.connect()
        return await conn.execution_options(isolation_level="AUTOCOMMIT")

    async def try_acquire(self) -> bool:
        await self._drop()
        conn = await self._connect()
        try:
            got = await conn.scalar(
                text("SELECT pg_try_advisory_lock(:a, :b)"),
                {"a": PG_LOCK_KEYS[0], "b": PG_LOCK_KEYS[1]},
            )
        except BaseException:
            await _close_quietly(conn)
            raise
        if not got:
            await _close_quietly(conn)
            return False
        self._conn = conn
        return True

    async def holder(self) -> str:
        try:
            conn = await self._connect()
            try:
                row = (
                    await conn.execute(
                        text(
                            "SELECT a.application_name, a.client_addr::text, a.backend_start "
                            "FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                            "WHERE l.locktype = 'advisory' AND l.classid = :a AND l.objid = :b "
                            "AND l.objsubid = 2 AND l.granted AND l.database = "
                            "(SELECT oid FROM pg_database WHERE datname = current_database())"
                        ),
                        {"a": PG_LOCK_KEYS[0], "b": PG_LOCK_KEYS[1]},
                    )
                ).first()
            finally:
                await _close_quietly(conn)
        except Exception:  # who holds it is for the log only
            return "another manager"
        if row is None:
            return "another manager"
        name, address, since = row
        where = f" from {address}" if address else ""
        return f"{name or 'another client'}{where} (since {since:%Y-%m-%d %H:%M:%S %Z})"

    async def still_held(self) -> bool:
        """The lock lives as long as its connection: ask the connection."""
        if self._conn is None:
            return False
        try:
            await asyncio.wait_for(self._conn.scalar(text("SELECT 1")), CHECK_TIMEOUT_S)
        except Exception:
            await self._drop()
            return False
        return True

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await _close_quietly(conn)

    async def release(self) -> None:
        # Closing the connection ends the session, and the lock with it.
        await self._drop()
        await self._engine.dispose()


class FileLease(Lease):
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    async def try_acquire(self) -> bool:
        if self._fd is not None:
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        since = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        os.ftruncate(fd, 0)
        os.write(fd, f"{describe_self()} (since {since})\n".encode())
        self._fd = fd
        return True

    async def holder(self) -> str:
        try:
            said = self.path.read_text().strip()
        except OSError:
            said = ""
        return f"{said or 'another manager'} ({self.path})"

    async def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # drops the flock


def lease_for(database_url: str) -> Lease:
    url = make_url(database_url)
    if url.get_backend_name() == "postgresql":
        return PostgresLease(database_url)
    database = url.database or ""
    if database in ("", ":memory:") or url.query.get("mode") == "memory":
        return Lease()
    return FileLease(Path(f"{database}.manager-lock"))


async def _close_quietly(conn: AsyncConnection) -> None:
    with contextlib.suppress(Exception):
        await asyncio.wait_for(conn.close(), CHECK_TIMEOUT_S)


async def watch(
    lease: Lease,
    check_s: float,
    *,
    on_lost: Callable[[], None],
    on_back: Callable[[], None],
    on_taken: Callable[[str], None],
) -> None:
    """Check the lease every check_s. Lost: on_lost() at once (close the fence), then take it
    again (on_back(), open the fence) or, when another manager has it, on_taken(who) and
    return: this manager must stop."""
    while True:
        await asyncio.sleep(check_s)
        if await lease.still_held():
            continue
        on_lost()
        log.error("lost the database lease (its connection ended): writes stop until it is back")
        while True:
            try:
                if await lease.try_acquire():
                    log.warning("database lease taken again: writes go on")
                    on_back()
                    break
                on_taken(await lease.holder())
                return
            except Exception as exc:  # the database is away: keep trying, writes stay off
                log.warning("database lease not taken again yet (%s); retrying", type(exc).__name__)
            await asyncio.sleep(check_s)
