"""A run on Postgres through a database outage, on real processes: the manager's connections
terminated again and again mid-run are ridden out (the run completes by itself, no round is
half-written, the export equals an undisturbed run's), and an outage longer than
POPULACE_ROUND_STORE_RETRY_S pauses the run with a plain reason, never the driver's text."""

from __future__ import annotations

import asyncio
import threading
import time

import asyncpg
import pytest

from backend.db.lease import PG_LOCK_KEYS
from tests.conftest import PG_ADMIN_URL
from tests.support import wait_for
from tests.support_faults import FAST, start_node
from tests.support_simulations import (
    EventLog,
    deploy,
    export,
    finish,
    rounds_of,
    start,
)

pytestmark = pytest.mark.postgres

# What a user must never see: the ORM's, the driver's or Python's own words.
RAW = ("sqlalche", "asyncpg", "Error", "Traceback", "cannot call")
CONFIG = {"rounds": 8, "policy": {"kind": "synthetic", "latency_s": 0.2}, "seed": 909}


def _plain(text: str | None) -> bool:
    return text is None or not any(word in text for word in RAW)


class ConnectionKiller:
    """Terminates every connection to the test database but its own, over and over, from a
    thread with its own event loop (as an operator's pg_terminate_backend would)."""

    def __init__(self, database: str) -> None:
        self.database = database
        self.killed = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    async def _kill_once(self, admin) -> int:
        return len(
            await admin.fetch(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = $1 AND pid <> pg_backend_pid()",
                self.database,
            )
        )

    async def _loop(self, every_s: float) -> None:
        admin = await asyncpg.connect(PG_ADMIN_URL.replace("postgresql+asyncpg", "postgresql"))
        try:
            while not self._stop.is_set():
                self.killed += await self._kill_once(admin)
                await asyncio.sleep(every_s)
        finally:
            await admin.close()

    def start(self, every_s: float = 0.02) -> ConnectionKiller:
        self._thread = threading.Thread(target=asyncio.run, args=(self._loop(every_s),))
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)


def _admin(sql: str) -> None:
    async def run() -> None:
        conn = await asyncpg.connect(PG_ADMIN_URL.replace("postgresql+asyncpg", "postgresql"))
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(run())


def _lease_held(database: str) -> bool:
    async def run() -> bool:
        conn = await asyncpg.connect(PG_ADMIN_URL.replace("postgresql+asyncpg", "postgresql"))
        try:
            return (
                await conn.fetchval(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                    "AND classid = $1 AND objid = $2 AND objsubid = 2 "
                    "AND database = (SELECT oid FROM pg_database WHERE datname = $3)",
                    *PG_LOCK_KEYS,
                    database,
                )
                > 0
            )
        finally:
            await conn.close()

    return asyncio.run(run())


def _timeline_messages(api, sid: int) -> list[str]:
    resp = api.get(f"/api/simulations/{sid}/timeline", params={"limit": 200})
    assert resp.status_code == 200, resp.text
    return [entry["message"] for entry in resp.json()["items"]]


def _events_plain(events: EventLog) -> None:
    for event in events.events:
        payload = event.get("payload") or {}
        for key in ("message", "pause_reason", "error"):
            assert _plain(payload.get(key)), event


@pytest.fixture
def pg_cluster(manager_factory, postgres_url):
    def make(**env):
        manager = manager_factory(database_url=postgres_url, extra_env={**FAST, **env}).start()
        start_node(manager, "node-a", procs=1)
        return manager, postgres_url.rsplit("/", 1)[1]

    return make


def test_connections_terminated_mid_run_are_ridden_out_and_the_export_is_the_same(pg_cluster):
    manager, database = pg_cluster()
    pid = deploy(manager, size=1000)
    config = {"population_id": pid, **CONFIG}
    events = EventLog(manager, "simulation:*")
    try:
        with manager.api() as api:
            sid = start(api, config)["id"]
            wait_for(
                lambda: api.get(f"/api/simulations/{sid}").json()["current_round"] >= 2,
                60,
                what="two rounds kept",
            )
            killer = ConnectionKiller(database).start()
            try:
                # Connections die for a few seconds, over several rounds and their commits.
                time.sleep(3)
            finally:
                killer.stop()
            assert killer.killed > 0

            done = finish(api, sid)
            assert done["status"] == "completed", done
            # The manager took its lease again on a new connection (the killer cut the old one).
            wait_for(
                lambda: _lease_held(database), 30, what="the manager's database lease taken again"
            )
            assert done["error"] is None and done["pause_reason"] is None, done
            played = rounds_of(api, sid)
            assert [r["round"] for r in played] == list(range(1, 9))
            assert all(r["n_valid"] + r["n_invalid"] + r["n_late"] == 1000 for r in played)
            disturbed = export(api, sid, "csv")
            # Every round whole in the store: 1,000 decisions each, none twice.
            assert len(disturbed.decode().strip().splitlines()) == 1 + 8 * 1000

            # The outage was felt by the run, and told in plain words.
            faults = [e["payload"]["message"] for e in events.of("simulation.fault")]
            assert any("the database is unreachable; retrying" in m for m in faults), faults
            _events_plain(events)
            assert all(_plain(m) for m in _timeline_messages(api, sid))

            again = start(api, config)["id"]
            assert finish(api, again)["status"] == "completed"
            assert export(api, again, "csv") == disturbed
    finally:
        events.close()


def test_an_outage_longer_than_the_retry_window_pauses_with_a_plain_reason(pg_cluster):
    manager, database = pg_cluster(POPULACE_ROUND_STORE_RETRY_S="1")
    pid = deploy(manager, size=1000)
    log_path = manager.tmp / f"manager-{manager.port}.log"
    events = EventLog(manager, "simulation:*")
    try:
        with manager.api() as api:
            sid = start(api, {"population_id": pid, **CONFIG})["id"]
            wait_for(
                lambda: api.get(f"/api/simulations/{sid}").json()["current_round"] >= 1,
                60,
                what="a round kept",
            )
            # The database goes away: no new connection, every open one cut.
            _admin(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
            killer = ConnectionKiller(database).start(every_s=0.1)
            try:
                wait_for(
                    lambda: "the database stayed unreachable" in log_path.read_text(),
                    60,
                    what="the run to give up on the database",
                )
            finally:
                killer.stop()
                _admin(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')

            paused = wait_for(
                lambda: (
                    (s := api.get(f"/api/simulations/{sid}").json())["status"]
                    in ("paused", "failed", "completed")
                    and s
                ),
                60,
                what="the run to stop",
            )
            assert paused["status"] == "paused", paused
            assert paused["pause_reason"].startswith("the database could not be reached for 1 s"), (
                paused
            )
            assert _plain(paused["pause_reason"]) and paused["error"] is None, paused
            kept = paused["current_round"]
            assert all(r["n_valid"] == 1000 for r in rounds_of(api, sid))
            assert len(rounds_of(api, sid)) == kept
            _events_plain(events)
            assert all(_plain(m) for m in _timeline_messages(api, sid))

            resumed = api.post(f"/api/simulations/{sid}/resume", json={})
            assert resumed.status_code == 200, resumed.text
            done = finish(api, sid)
            assert done["status"] == "completed", done
            # The manager took its lease again on a new connection (the killer cut the old one).
            wait_for(
                lambda: _lease_held(database), 30, what="the manager's database lease taken again"
            )
            assert [r["n_valid"] for r in rounds_of(api, sid)] == [1000] * 8
    finally:
        events.close()
