"""Workers' RPC secrets are never in the store in a form a database reader could use: sealed
with a key that lives only with the manager, the manager still calls its workers across a
restart, and a manager with another key gets its workers to register again."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
from pathlib import Path

import sqlalchemy as sa

from backend.db.migrate import downgrade, upgrade
from backend.db.session import make_engine
from tests.support import WORKER_RPC_SECRET, wait_for

PLAINTEXT = "plaintext-secret-of-an-old-worker-" + os.urandom(4).hex()
REREGISTER = "asked to register again"


def _db_bytes(path: Path) -> bytes:
    """The SQLite database as a reader of its files sees it (main file and write-ahead log)."""
    return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())


def _rows(url: str, sql: str) -> list[tuple]:
    async def read() -> list[tuple]:
        engine = make_engine(url)
        try:
            async with engine.connect() as conn:
                return [tuple(r) for r in await conn.execute(sa.text(sql))]
        finally:
            await engine.dispose()

    return asyncio.run(read())


def _execute(url: str, sql: str, **params) -> None:
    async def run() -> None:
        engine = make_engine(url)
        try:
            async with engine.begin() as conn:
                await conn.execute(sa.text(sql), params)
        finally:
            await engine.dispose()

    asyncio.run(run())


def _columns(url: str) -> set[str]:
    async def read() -> set[str]:
        engine = make_engine(url)
        try:
            async with engine.connect() as conn:
                return await conn.run_sync(
                    lambda c: {col["name"] for col in sa.inspect(c).get_columns("workers")}
                )
        finally:
            await engine.dispose()

    return asyncio.run(read())


def test_the_upgrade_drops_plaintext_secrets_and_a_downgrade_makes_workers_register_again(
    database_url,
):
    upgrade(database_url, "0011_run_events")
    _execute(
        database_url,
        "INSERT INTO workers (node, slot, address, pid, version, state, lease, rpc_secret, tls, "
        "labels, drain_requested, agents, capacity, cpu_percent, rss_bytes, inflight_llm_calls, "
        "registered_at, last_heartbeat) VALUES ('old-node', 0, '127.0.0.1:1', 1, '0.1.0', "
        "'online', 'old-lease', :secret, false, '{}', false, 0, 10, 0, 0, 0, "
        "CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)",
        secret=PLAINTEXT,
    )

    upgrade(database_url)
    columns = _columns(database_url)
    assert "rpc_secret" not in columns and "rpc_secret_sealed" in columns
    ((sealed, lease),) = _rows(database_url, "SELECT rpc_secret_sealed, lease FROM workers")
    # Nothing to seal it with here: it is gone, and the manager will ask the worker for a new one.
    assert sealed is None and lease == "old-lease"
    if database_url.startswith("sqlite"):
        path = Path(database_url.split(":///", 1)[1])
        assert PLAINTEXT.encode() not in _db_bytes(path), "the old table's pages still hold it"

    downgrade(database_url, "0011_run_events")
    ((secret, lease),) = _rows(database_url, "SELECT rpc_secret, lease FROM workers")
    # The older manager cannot call a worker without its secret: the worker's next heartbeat
    # is told to register again (a new lease), and it brings its secret.
    assert secret is None and lease != "old-lease"
    upgrade(database_url)


def _worker(manager) -> dict:
    (worker,) = wait_for(
        lambda: [w for w in manager.workers() if w["state"] == "online"] or None,
        30,
        what="the worker online",
    )
    return worker


def _logs_status(manager, worker_id: int) -> int:
    with manager.api() as api:
        return api.get(f"/api/workers/{worker_id}/logs", params={"limit": 1}).status_code


def test_secrets_are_sealed_in_the_store_and_survive_a_restart_but_not_another_key(
    manager_factory, tmp_path
):
    manager = manager_factory().start()
    db = tmp_path / "populace.db"
    manager.start_workers(procs=1)  # with WORKER_RPC_SECRET: a secret the test knows
    worker = _worker(manager)
    assert _logs_status(manager, worker["id"]) == 200

    # A reader of the database files finds no secret, only what the manager's key opens.
    assert WORKER_RPC_SECRET.encode() not in _db_bytes(db)
    con = sqlite3.connect(db)
    try:
        ((sealed,),) = con.execute(
            "SELECT rpc_secret_sealed FROM workers WHERE id = ?", (worker["id"],)
        ).fetchall()
    finally:
        con.close()
    assert sealed.startswith("v1:") and WORKER_RPC_SECRET not in sealed
    key_file = tmp_path / "data" / "worker_secret_key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600

    # Restarted with the same data dir: the manager calls the worker at once, from the store.
    manager.stop()
    manager.start()
    assert _logs_status(manager, worker["id"]) == 200
    assert REREGISTER not in manager.log()

    # Restarted with another key (the data dir lost, say): the sealed secret does not open;
    # the worker is asked to register again, keeps its id, and is called with its new secret.
    manager.stop()
    manager.extra_env["POPULACE_WORKER_SECRET_KEY"] = "another-manager-key-" + "x" * 24
    manager.start()
    assert REREGISTER in manager.log()
    wait_for(
        lambda: _logs_status(manager, worker["id"]) == 200,
        30,
        what="the worker registered again and reachable",
    )
    assert [w["id"] for w in manager.workers()] == [worker["id"]]
    assert WORKER_RPC_SECRET.encode() not in _db_bytes(db)
