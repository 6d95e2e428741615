"""Engine and session factory for SQLite (embedded default) and Postgres."""

from __future__ import annotations

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine


def make_engine(database_url: str) -> AsyncEngine:
    if database_url.startswith("sqlite"):
        engine = create_async_engine(database_url, connect_args={"timeout": 30})

        @event.listens_for(engine.sync_engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _record):
            # WAL lets readers run beside the one writer; busy_timeout waits instead of failing.
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        return engine
    # pool_pre_ping: a connection that died in the pool (Postgres restarted, its backend
    # terminated) is replaced at checkout, never handed out.
    engine = create_async_engine(database_url, pool_size=10, max_overflow=20, pool_pre_ping=True)
    event.listen(engine.sync_engine, "handle_error", _broken_protocol_is_a_disconnect)
    return engine


# asyncpg's errors of a connection whose protocol was left mid-operation (its backend was
# terminated under a call): "cannot switch to state N; another operation (M) is in progress".
# SQLAlchemy does not count them as disconnects, so such a connection went back to the pool and
# failed every later checkout (its pre-ping included); counted as one, it is thrown away.
_BROKEN_PROTOCOL = ("InternalClientError",)
_BROKEN_PROTOCOL_TEXT = ("another operation is in progress", "another operation (")


def _broken_protocol_is_a_disconnect(context) -> None:
    error = context.original_exception
    causes = {type(error).__name__, type(getattr(error, "__cause__", None)).__name__}
    text = str(error)
    if any(name in causes for name in _BROKEN_PROTOCOL) or any(
        part in text for part in _BROKEN_PROTOCOL_TEXT
    ):
        context.is_disconnect = True


def make_sessionmaker(engine: AsyncEngine) -> async_sessionmaker:
    return async_sessionmaker(engine, expire_on_commit=False)
