"""One worker process, in-process with real gRPC, registered with a real manager process; and
the life of a whole `populace worker --procs 2` node whose process crashes.

The cluster tests (test_cluster.py) drive whole `populace worker` nodes from outside; most of
these look inside one WorkerProcess (its lifecycle, its log) while the real manager answers.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
import psutil
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support import (
    WORKER_RPC_SECRET,
    consecutive_free_ports,
    free_port,
    pid_alive,
    populace_cmd,
    stop_process,
    wait_for,
    worker_metadata,
)
from worker_server.exit_codes import ExitCode
from worker_server.lifecycle import StopReason
from worker_server.process import WorkerProcess
from worker_server.rpc import worker_pb2, worker_pb2_grpc
from worker_server.settings import WorkerSettings

FAST_HEARTBEATS = {"POPULACE_HEARTBEAT_INTERVAL_S": "0.1"}


def make_process(manager, join_token: str | None = None, **kwargs) -> WorkerProcess:
    settings = WorkerSettings(
        manager_url=manager.url,
        join_token=join_token or manager.join_token,
        port=0,
        procs=2,
        node="node-x",
        rpc_secret=WORKER_RPC_SECRET,
    )
    return WorkerProcess(settings, **kwargs)


async def until(predicate, what: str, within_s: float = 15.0):
    """tests.support.wait_for in a thread, so the worker keeps running on this event loop."""
    return await asyncio.to_thread(wait_for, predicate, within_s, 0.05, what)


def row(manager, worker_id: int) -> dict:
    with manager.api() as api:
        resp = api.get(f"/api/workers/{worker_id}")
    assert resp.status_code == 200, resp.text
    return resp.json()


async def grpc_info(address: str):
    async with grpc.aio.insecure_channel(address) as channel:
        info = await worker_pb2_grpc.WorkerServiceStub(channel).GetInfo(
            worker_pb2.GetInfoRequest(), timeout=5, metadata=worker_metadata()
        )
        health = health_pb2_grpc.HealthStub(channel)
        statuses = [
            (await health.Check(health_pb2.HealthCheckRequest(service=name), timeout=5)).status
            for name in ("", "populace.v1.WorkerService")
        ]
    return info, statuses


async def test_serves_grpc_heartbeats_reregisters_on_a_fresh_manager_and_stops_when_removed(
    manager_factory, tmp_path, capsys, caplog
):
    caplog.set_level("INFO", logger="populace.worker")
    first = manager_factory(
        database_url=f"sqlite+aiosqlite:///{tmp_path}/first.db", extra_env=FAST_HEARTBEATS
    ).start()
    worker = make_process(first)
    run = asyncio.create_task(worker.run())
    try:
        worker_id = await until(lambda: worker.lifecycle.worker_id, "registration")
        # Heartbeats arrive, carrying this process's stats.
        stored = await until(
            lambda: (
                (r := row(first, worker_id))["last_heartbeat"] > r["registered_at"]
                and r["rss_bytes"] > 0
                and r
            ),
            "a heartbeat with stats",
        )
        info, statuses = await grpc_info(worker.address)
        assert statuses == [health_pb2.HealthCheckResponse.SERVING] * 2
        assert (info.worker_id, info.pid, info.node) == (worker_id, os.getpid(), "node-x")
        assert info.address == worker.address and not worker.address.endswith(":0")
        assert info.capacity > 0 and info.rss_bytes > 0 and info.started_at > 0
        # What the manager stored is what the process registered.
        assert (stored["pid"], stored["address"], stored["node"], stored["capacity"]) == (
            os.getpid(),
            worker.address,
            "node-x",
            info.capacity,
        )
        assert stored["version"] == info.version

        # The manager restarts on a fresh database: heartbeats get 404, the process registers again.
        await asyncio.to_thread(first.stop)
        second = manager_factory(
            database_url=f"sqlite+aiosqlite:///{tmp_path}/second.db",
            port=first.port,
            api_token=first.api_token,
            join_token=first.join_token,
            extra_env=FAST_HEARTBEATS,
        )
        await asyncio.to_thread(second.start)
        await until(lambda: worker.lifecycle.registrations == 2, "re-registration", within_s=20)
        assert f"manager does not know worker {worker_id}" in caplog.text
        new_id = worker.lifecycle.worker_id
        (listed,) = second.workers()
        assert (listed["id"], listed["pid"], listed["address"]) == (
            new_id,
            os.getpid(),
            worker.address,
        )
        await until(
            lambda: (r := row(second, new_id))["last_heartbeat"] > r["registered_at"],
            "a heartbeat to the new manager",
        )
        info, _ = await grpc_info(worker.address)
        assert info.worker_id == new_id
        out = capsys.readouterr().out
        assert f", registered as worker {worker_id}\n" in out
        assert f", re-registered as worker {new_id}\n" in out

        # An operator removes the worker: the next heartbeat gets 410 and the process exits 0.
        with second.api() as api:
            assert api.delete(f"/api/workers/{new_id}").status_code == 204
        assert await asyncio.wait_for(run, 5) == ExitCode.OK
        assert worker.lifecycle.stop_reason is StopReason.REMOVED
        assert row(second, new_id)["state"] == "removed"
    finally:
        if not run.done():
            worker.request_stop(StopReason.SIGNAL)
            await asyncio.wait_for(run, 5)


async def test_a_rejected_join_token_exits_3_with_a_clear_message(shared_manager, capsys):
    worker = make_process(shared_manager, join_token="not-the-join-token")
    assert await asyncio.wait_for(worker.run(), 10) == ExitCode.JOIN_TOKEN_REJECTED == 3
    assert worker.lifecycle.registrations == 0
    assert (
        f"populace worker: the manager at {shared_manager.url} rejected the join token "
        "(401 invalid join token)"
    ) in capsys.readouterr().err


async def test_an_orphaned_process_deregisters_and_stops_itself(shared_manager):
    worker = make_process(shared_manager, parent_pid=os.getppid())
    run = asyncio.create_task(worker.run())
    try:
        worker_id = await until(lambda: worker.lifecycle.worker_id, "registration")
        assert row(shared_manager, worker_id)["state"] == "online"
        worker.parent_pid = os.getppid() + 1_000_000  # as if the supervisor had died
        assert await asyncio.wait_for(run, 5) == ExitCode.OK
    finally:
        if not run.done():
            worker.request_stop(StopReason.SIGNAL)
            await asyncio.wait_for(run, 5)
    assert worker.lifecycle.stop_reason is StopReason.PARENT_DIED
    assert row(shared_manager, worker_id)["state"] == "removed"


async def test_registration_carries_the_process_slot_on_its_node():
    """What the process sends, read by a real HTTP server of the test's own: the manager side of
    `slot` (the same worker for the same node and slot) is tested with the manager."""
    bodies: list[dict] = []

    class WorkerPlane(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            bodies.append({"path": self.path, **body})
            if self.path == "/api/workers/register":
                status, answer = (
                    200,
                    {
                        "id": 41,
                        "lease": "lease-41",
                        "heartbeat_interval_s": 0.05,
                        "ttl_s": 1.0,
                    },
                )
            else:  # the first heartbeat: removed, so the process exits 0 on its own
                status, answer = 410, {"detail": "worker 41 was removed"}
            payload = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), WorkerPlane)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        settings = WorkerSettings(
            manager_url=f"http://127.0.0.1:{server.server_port}",
            join_token="tok",
            port=0,
            procs=4,
            node="node-s",
        )
        worker = WorkerProcess(settings, slot=3)
        assert await asyncio.wait_for(worker.run(), 10) == ExitCode.OK
    finally:
        server.shutdown()
        server.server_close()
    register = bodies[0]
    assert register["path"] == "/api/workers/register"
    assert (register["slot"], register["node"], register["pid"]) == (3, "node-s", os.getpid())
    assert register["address"] == worker.address
    assert bodies[1]["path"] == "/api/workers/41/heartbeat"
    assert worker.lifecycle.stop_reason is StopReason.REMOVED


def pid_on(port: int) -> int:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        info = worker_pb2_grpc.WorkerServiceStub(channel).GetInfo(
            worker_pb2.GetInfoRequest(), timeout=2, metadata=worker_metadata()
        )
    return info.pid


def children_of(pid: int) -> list[int]:
    return sorted(p.pid for p in psutil.Process(pid).children())


def slot_of(pid: int) -> int:
    command = psutil.Process(pid).cmdline()
    return int(command[command.index("--index") + 1])


def test_a_sigkilled_process_of_a_node_is_restarted_in_its_slot_and_its_sibling_keeps_running(
    tmp_path,
):
    # No manager answers yet: the processes serve gRPC and keep retrying their registration,
    # so this is the supervisor alone. (Re-registering as the same worker needs the manager.)
    base = consecutive_free_ports(2)
    log_path = tmp_path / "node.log"
    with log_path.open("ab") as log:
        node = subprocess.Popen(
            populace_cmd(
                "worker",
                "--manager",
                f"http://127.0.0.1:{free_port()}",
                "--procs",
                "2",
                "--port",
                str(base),
            ),
            cwd=tmp_path,
            env={
                **os.environ,
                "POPULACE_JOIN_TOKEN": "no-manager-yet",
                "POPULACE_RPC_SECRET": WORKER_RPC_SECRET,
            },
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        sibling, doomed = wait_for(
            lambda: [pid_on(base), pid_on(base + 1)], timeout=60, what="both processes serving"
        )
        assert children_of(node.pid) == sorted([sibling, doomed])
        assert (slot_of(sibling), slot_of(doomed)) == (0, 1)

        os.kill(doomed, signal.SIGKILL)
        reborn = wait_for(
            lambda: (pid := pid_on(base + 1)) != doomed and pid,
            timeout=30,
            what="a new process serving on the killed process's port",
        )
        assert slot_of(reborn) == 1
        assert not pid_alive(doomed)
        assert node.poll() is None
        assert pid_on(base) == sibling and pid_alive(sibling)
        assert children_of(node.pid) == sorted([sibling, reborn])
        log_text = log_path.read_text(errors="replace")
        assert f"process 2/2 (pid {doomed}) was killed by SIGKILL; restarting it in" in log_text
        assert f"restarted process 2/2 (pid {reborn}) on port {base + 1}" in log_text

        # SIGTERM still stops the whole node cleanly, and nothing is restarted on the way out.
        assert stop_process(node, signal.SIGTERM) == 0
        wait_for(
            lambda: not any(pid_alive(p) for p in (sibling, reborn)),
            timeout=10,
            what="both processes gone",
        )
        assert log_path.read_text(errors="replace").count("restarted process") == 1
    finally:
        if node.poll() is None:
            stop_process(node, signal.SIGTERM)
