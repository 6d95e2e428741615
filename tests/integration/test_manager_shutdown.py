"""A manager told to stop stops, whatever its database calls are doing, and writes nothing more;
two managers on one database never both act (issue 26, item 2). Real `populace manager`
processes on Postgres; the test blocks and cuts the manager's database calls from its own
connection, as an operator's lock or pg_terminate_backend would."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
from datetime import timedelta

import asyncpg
import httpx
import pytest

from backend.shutdown import HUNG_EXIT_CODE, LEASE_LOST_EXIT_CODE
from tests.support import Manager, populace_cmd, wait_for

pytestmark = pytest.mark.postgres

# A short bound keeps the tests quick; the behaviour is the same at the default 10 s.
FAST = {"POPULACE_SHUTDOWN_TIMEOUT_S": "4"}


class PgSession:
    """A connection of the test's own, on a private event loop (the test itself is sync)."""

    def __init__(self, url: str) -> None:
        self.url = url.replace("postgresql+asyncpg", "postgresql")
        self.loop = asyncio.new_event_loop()
        self.conn = self.loop.run_until_complete(asyncpg.connect(self.url))

    def run(self, method: str, sql: str, *args):
        return self.loop.run_until_complete(getattr(self.conn, method)(sql, *args))

    def lock(self, table: str) -> None:
        """Hold an ACCESS EXCLUSIVE lock on the table: every query on it waits."""
        self.run("execute", f"BEGIN; LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")

    def unlock(self) -> None:
        self.run("execute", "ROLLBACK")

    def waiting_on_locks(self) -> list[int]:
        # The activity view is a snapshot per transaction, and this one holds the lock.
        self.run("execute", "SELECT pg_stat_clear_snapshot()")
        rows = self.run(
            "fetch",
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()",
        )
        return [r["pid"] for r in rows]

    def terminate_others(self) -> int:
        rows = self.run(
            "fetch",
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        return len(rows)

    def close(self) -> None:
        self.loop.run_until_complete(self.conn.close())
        self.loop.close()


@pytest.fixture
def pg(postgres_url):
    session = PgSession(postgres_url)
    yield session
    session.close()


def launch(manager: Manager) -> Manager:
    """Start the manager process without waiting for it to serve (a standby never does)."""
    log = open(manager.tmp / f"manager-{manager.port}.log", "ab")
    manager.proc = subprocess.Popen(
        populace_cmd("manager", "--port", str(manager.port)),
        cwd=manager.tmp,
        env=manager.env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    return manager


def full_log(manager: Manager) -> str:
    return (manager.tmp / f"manager-{manager.port}.log").read_text(errors="replace")


def wait_exit(manager: Manager, what: str) -> int:
    # Generous: a guard against hanging, not a bound on how fast it stops.
    wait_for(lambda: manager.proc.poll() is not None, 90, what=what)
    return manager.proc.returncode


def assert_stopped_cleanly_or_named_the_hang(manager: Manager, code: int) -> None:
    log = full_log(manager)
    assert "Shutting down" in log, log[-3000:]
    after_stop = log.split("Shutting down", 1)[1]
    # A loop that took its cancellation for a transient error retried (and kept the process up).
    assert "retrying" not in after_stop, after_stop[-3000:]
    assert code in (-signal.SIGTERM, HUNG_EXIT_CODE), (code, log[-3000:])
    if code == HUNG_EXIT_CODE:
        assert "did not finish within" in after_stop, after_stop[-3000:]
        assert "still running" in after_stop or "did not stop" in after_stop, after_stop[-3000:]


def serving(manager: Manager) -> bool:
    try:
        return httpx.get(f"{manager.url}/healthz", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def worker_row(pg: PgSession) -> tuple[str, object]:
    row = pg.run("fetchrow", "SELECT state, last_heartbeat FROM workers ORDER BY id LIMIT 1")
    return row["state"], row["last_heartbeat"]


def test_sigterm_while_a_database_call_waits_on_a_held_lock(manager_factory, postgres_url, pg):
    manager = manager_factory(postgres_url, extra_env=FAST).start()
    # The placement keeper reads populations every second: its query waits on the lock.
    pg.lock("populations")
    try:
        wait_for(pg.waiting_on_locks, 30, what="a manager query waiting on the held lock")
        manager.proc.send_signal(signal.SIGTERM)
        code = wait_exit(manager, "the manager to exit after SIGTERM")
    finally:
        pg.unlock()
    assert_stopped_cleanly_or_named_the_hang(manager, code)

    # A manager whose start-up is stuck in a database call (its schema upgrade, in a thread,
    # waits on a lock) still exits within the bound, and says where it was.
    pg.lock("alembic_version")
    try:
        stuck = launch(manager_factory(postgres_url, extra_env=FAST))
        wait_for(pg.waiting_on_locks, 60, what="the start-up migration waiting on the lock")
        stuck.proc.send_signal(signal.SIGTERM)
        code = wait_exit(stuck, "the stuck manager to exit after SIGTERM")
    finally:
        pg.unlock()
    log = full_log(stuck)
    assert code == HUNG_EXIT_CODE, (code, log[-3000:])
    assert "did not finish within 4 s" in log, log[-3000:]
    assert "phase: starting: upgrading the database schema" in log, log[-3000:]


def test_sigterm_while_the_database_cuts_the_managers_connections(
    manager_factory, postgres_url, pg
):
    manager = manager_factory(postgres_url, extra_env=FAST).start()
    pg.lock("populations")
    try:
        # A disconnect episode: the waiting query's connection (and every other) is cut; the
        # manager connects again and its next query waits on the lock again.
        cut = wait_for(pg.waiting_on_locks, 30, what="a manager query waiting on the held lock")
        assert pg.terminate_others() >= 1
        wait_for(
            lambda: set(pg.waiting_on_locks()) - set(cut),
            30,
            what="a manager query on a new connection waiting on the lock",
        )
        # Then the signal, and the connections cut again while the cancelled calls unwind.
        manager.proc.send_signal(signal.SIGTERM)
        pg.terminate_others()
        code = wait_exit(manager, "the manager to exit after SIGTERM and terminated backends")
    finally:
        pg.unlock()
    assert_stopped_cleanly_or_named_the_hang(manager, code)


def test_a_stopping_manager_never_marks_workers_offline(manager_factory, postgres_url, pg):
    # Workers cannot reach a stopping manager (its port is closed) while it drains a slow
    # request: its liveness sweep would call them all offline after one TTL.
    manager = manager_factory(
        postgres_url,
        extra_env={
            "POPULACE_SHUTDOWN_TIMEOUT_S": "6",  # 3 s for open requests: 2 TTLs
            "POPULACE_HEARTBEAT_INTERVAL_S": "0.5",
            "POPULACE_WORKER_TTL_S": "1.5",
        },
    ).start()
    manager.start_workers(procs=1)
    wait_for(lambda: manager.workers()[0]["state"] == "online", 60, what="the worker online")
    with socket.create_connection(("127.0.0.1", manager.port)) as slow:
        slow.sendall(
            f"POST /api/populations HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
            f"{manager.api_token}\r\nContent-Type: application/json\r\n"
            f"Content-Length: 1000\r\n\r\n{{".encode()
        )
        manager.proc.send_signal(signal.SIGTERM)
        code = wait_exit(manager, "the manager to exit while a request is open")
    assert_stopped_cleanly_or_named_the_hang(manager, code)
    state, _ = worker_row(pg)
    assert state == "online", full_log(manager)[-3000:]


def test_a_second_manager_on_the_database_waits_for_the_lease(manager_factory, postgres_url, pg):
    first = manager_factory(postgres_url, extra_env={"POPULACE_LEASE_CHECK_S": "2"}).start()
    first.start_workers(procs=1)
    wait_for(lambda: first.workers()[0]["state"] == "online", 60, what="the worker online")

    # The second one would call the worker offline one TTL after it started (it never beats
    # the second one), if it acted.
    second = launch(
        manager_factory(
            postgres_url,
            extra_env={
                "POPULACE_STARTUP_GRACE_S": "0",
                "POPULACE_WORKER_TTL_S": "1",
                "POPULACE_LEASE_CHECK_S": "0.1",
            },
        )
    )
    wait_for(
        lambda: (
            f"waiting for the database lease held by populace manager pid {first.proc.pid}"
            in full_log(second)
        ),
        60,
        what="the second manager waiting for the lease",
    )
    # The first manager goes on writing the worker's beats; nobody calls it offline.
    _, seen = worker_row(pg)
    wait_for(
        lambda: worker_row(pg)[1] >= seen + timedelta(seconds=3),
        30,
        what="the first manager storing the worker's beats",
    )
    assert worker_row(pg)[0] == "online"
    assert second.proc.poll() is None and not serving(second)

    # The first one's lease connection is cut: the second takes the lease; the first, no
    # longer sure it is alone, stops writing at once and then stops.
    pg.run(
        "execute",
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
        f"populace manager pid {first.proc.pid} on {socket.gethostname()}"[:63],
    )
    code = wait_exit(first, "the first manager to stop after losing its lease")
    assert code == LEASE_LOST_EXIT_CODE, full_log(first)[-3000:]
    assert "another manager took the database lease" in full_log(first)
    wait_for(lambda: serving(second), 60, what="the second manager serving")
    assert "database lease taken" in full_log(second)
