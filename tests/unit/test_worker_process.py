"""One worker process, in-process: real gRPC on localhost, a scripted manager over MockTransport."""

import asyncio
import json
import os

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from worker_server.lifecycle import StopReason
from worker_server.manager_client import ManagerClient
from worker_server.process import WorkerProcess
from worker_server.rpc import worker_pb2, worker_pb2_grpc
from worker_server.settings import WorkerSettings


class ScriptedManager:
    """Answers register with increasing ids; heartbeats with whatever `heartbeat_status` says."""

    def __init__(self, *, token: str = "tok") -> None:
        self.token = token
        self.next_id = 1
        self.heartbeat_status = 200
        self.calls: list[tuple[str, dict | None]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        self.calls.append((request.url.path, body))
        if request.headers.get("authorization") != f"Bearer {self.token}":
            return httpx.Response(401, json={"detail": "invalid join token"})
        if request.url.path == "/api/workers/register":
            worker_id, self.next_id = self.next_id, self.next_id + 1
            return httpx.Response(
                201, json={"id": worker_id, "heartbeat_interval_s": 0.02, "ttl_s": 1.0}
            )
        if request.url.path.endswith("/deregister"):
            return httpx.Response(204)
        if self.heartbeat_status == 200:
            return httpx.Response(200, json={"state": "online"})
        return httpx.Response(self.heartbeat_status, json={"detail": "scripted"})

    def paths(self) -> list[str]:
        return [path for path, _ in self.calls]


def make_process(manager: ScriptedManager, join_token: str = "tok") -> WorkerProcess:
    settings = WorkerSettings(
        manager_url="http://mgr", join_token=join_token, port=0, procs=2, node="node-x"
    )
    client = ManagerClient("http://mgr", join_token, transport=httpx.MockTransport(manager))
    return WorkerProcess(settings, client=client)


async def wait_for(predicate, within_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + within_s
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached in time"
        await asyncio.sleep(0.01)


async def test_serves_grpc_registers_heartbeats_and_reregisters_until_removed():
    manager = ScriptedManager()
    worker = make_process(manager)
    run = asyncio.create_task(worker.run())
    await wait_for(lambda: manager.paths().count("/api/workers/1/heartbeat") >= 2)

    async with grpc.aio.insecure_channel(worker.address) as channel:
        info = await worker_pb2_grpc.WorkerServiceStub(channel).GetInfo(worker_pb2.GetInfoRequest())
        health = health_pb2_grpc.HealthStub(channel)
        statuses = [
            (await health.Check(health_pb2.HealthCheckRequest(service=name))).status
            for name in ("", "populace.v1.WorkerService")
        ]
    assert info.pid == os.getpid()
    assert info.worker_id == 1
    assert info.node == "node-x"
    assert info.address == worker.address and not worker.address.endswith(":0")
    assert info.capacity > 0 and info.rss_bytes > 0 and info.started_at > 0
    assert statuses == [health_pb2.HealthCheckResponse.SERVING] * 2

    register_body = manager.calls[0][1]
    assert register_body["pid"] == os.getpid()
    assert register_body["address"] == worker.address
    assert register_body["capacity"] == info.capacity

    manager.heartbeat_status = 404  # the manager restarted on a fresh database
    await wait_for(lambda: worker.lifecycle.worker_id == 2)
    manager.heartbeat_status = 200
    await wait_for(lambda: "/api/workers/2/heartbeat" in manager.paths())

    manager.heartbeat_status = 410  # an operator removed us
    assert await asyncio.wait_for(run, 5) == 0
    assert not any(path.endswith("/deregister") for path in manager.paths())


async def test_rejected_join_token_exits_3_with_a_clear_message(capsys):
    worker = make_process(ScriptedManager(token="right"), join_token="wrong")
    assert await asyncio.wait_for(worker.run(), 5) == 3
    assert (
        "populace worker: the manager at http://mgr rejected the join token "
        "(401 invalid join token)"
    ) in capsys.readouterr().err


async def test_stop_deregisters_and_closes_the_grpc_server():
    manager = ScriptedManager()
    worker = make_process(manager)
    run = asyncio.create_task(worker.run())
    await wait_for(lambda: "/api/workers/1/heartbeat" in manager.paths())
    worker.request_stop(StopReason.SIGNAL)
    assert await asyncio.wait_for(run, 5) == 0
    assert manager.paths()[-1] == "/api/workers/1/deregister"
    async with grpc.aio.insecure_channel(worker.address) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await worker_pb2_grpc.WorkerServiceStub(channel).GetInfo(
                worker_pb2.GetInfoRequest(), timeout=1
            )
    assert info.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


async def test_waits_for_an_unreachable_manager_and_still_stops_promptly(caplog):
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    settings = WorkerSettings(manager_url="http://mgr", join_token="tok", procs=1)
    client = ManagerClient("http://mgr", "tok", transport=httpx.MockTransport(refuse))
    worker = WorkerProcess(settings, client=client)
    caplog.set_level("WARNING", logger="populace.worker")
    run = asyncio.create_task(worker.run())
    await wait_for(lambda: worker.lifecycle.failures >= 2)
    assert "waiting for manager at http://mgr" in caplog.text
    worker.request_stop(StopReason.SIGNAL)
    assert await asyncio.wait_for(run, 2) == 0


async def test_an_orphaned_process_stops_itself():
    manager = ScriptedManager()
    worker = make_process(manager)
    worker.parent_pid = os.getppid() + 1_000_000  # not our parent: as if the supervisor died
    assert await asyncio.wait_for(worker.run(), 5) == 0
    assert worker.lifecycle.stop_reason is StopReason.PARENT_DIED
