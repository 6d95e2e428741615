"""The write fence: a manager that is stopping, or is not sure it still holds the database
lease, writes nothing.

Closed, it refuses every writing statement on the app's engine before it reaches the database,
and every commit of a transaction that wrote (a COPY goes to the driver directly, but always
with an INSERT or UPDATE beside it). So a manager whose shutdown hangs, or that lost its lease
to another manager, can no longer mark workers offline, fail or pause runs, or move agents,
whatever its tasks still try. Reads go on: a dashboard may watch a manager drain.
"""

from __future__ import annotations

import asyncio
import contextlib
import re

from sqlalchemy import event
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

# The first word of a statement that changes the store.
WRITE_VERBS = frozenset(
    {"INSERT", "UPDATE", "DELETE", "MERGE", "UPSERT", "REPLACE", "COPY", "TRUNCATE"}
    | {"CREATE", "DROP", "ALTER", "GRANT", "REVOKE", "VACUUM", "REINDEX", "CLUSTER"}
)
_WRITE_IN_CTE = re.compile(r"\b(INSERT|UPDATE|DELETE|MERGE)\b", re.IGNORECASE)
_WROTE = "populace_fence_wrote"


class ManagerNotActive(SQLAlchemyError, ConnectionError):
    """This manager may not write to the store now (it is stopping, or lost its lease). To its
    callers the store is unavailable, as in an outage: a run retries through it
    (backend.simulations.store_retry) until the lease is back, or this manager stops."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"this manager does not write to the database now: {reason}")
        self.reason = reason


def is_write(statement: str) -> bool:
    words = statement.lstrip(" \t\r\n(").split(None, 1)
    if not words:
        return False
    verb = words[0].upper()
    if verb == "WITH":  # a CTE: it writes when one of its parts does
        return bool(_WRITE_IN_CTE.search(statement))
    return verb in WRITE_VERBS


class WriteFence:
    def __init__(self) -> None:
        self.reason: str | None = None
        self.final = False  # closed for good: the manager is stopping
        self._opened = asyncio.Event()
        self._opened.set()

    @property
    def closed(self) -> bool:
        return self.reason is not None

    def close(self, reason: str, *, final: bool = False) -> None:
        if self.reason is None or (final and not self.final):
            self.reason = reason
            self._opened.clear()
        self.final = self.final or final

    def open(self) -> None:
        if not self.final:
            self.reason = None
            self._opened.set()

    async def wait_open(self, timeout_s: float) -> None:
        """Give a closed fence up to timeout_s to open again: a lease whose connection was cut
        is usually taken again within one check. Not when it is closed for good."""
        if self.closed and not self.final:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._opened.wait(), timeout_s)

    def check(self) -> None:
        if self.reason is not None:
            raise ManagerNotActive(self.reason)

    def attach(self, engine: AsyncEngine) -> None:
        """Guard every statement and commit of this engine (its own events: no global)."""
        sync = engine.sync_engine

        def before_execute(conn, _cursor, statement, _params, _context, _many) -> None:
            if not is_write(statement):
                return
            self.check()
            conn.info[_WROTE] = True

        def before_commit(conn) -> None:
            # An invalidated connection commits nothing (and has no info to ask).
            if conn.invalidated or not conn.info.pop(_WROTE, False) or not self.closed:
                return
            # Refused: roll the transaction back here. SQLAlchemy counts a transaction whose
            # commit raised as ended and would return the connection to its pool with the
            # writes still pending, for the next commit on it to make durable.
            conn.connection.dbapi_connection.rollback()
            self.check()

        def rolled_back(conn) -> None:
            if not conn.invalidated:
                conn.info.pop(_WROTE, None)

        event.listen(sync, "before_cursor_execute", before_execute)
        event.listen(sync, "commit", before_commit)
        event.listen(sync, "rollback", rolled_back)
