"""Only the manager drives a worker: every WorkerService call needs the process's secret, and a
registration is checked over gRPC before any agent is placed on it."""

from __future__ import annotations

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from tests.support import WORKER_RPC_SECRET, free_port, wait_for, worker_client, worker_metadata
from tests.support_simulations import deploy
from worker_server.rpc import worker_pb2

SERVICE = worker_pb2.DESCRIPTOR.services_by_name["WorkerService"]


def _call(channel: grpc.Channel, method, metadata) -> grpc.StatusCode:
    """Call `method` with an empty request (or stream of one); the status it ends with."""
    path = f"/{SERVICE.full_name}/{method.name}"
    request = b""  # an empty message: any request type decodes from it
    identity = {"request_serializer": None, "response_deserializer": None}
    try:
        if method.client_streaming and method.server_streaming:
            list(
                channel.stream_stream(path, **identity)(
                    iter([request]), metadata=metadata, timeout=10
                )
            )
        elif method.client_streaming:
            channel.stream_unary(path, **identity)(iter([request]), metadata=metadata, timeout=10)
        elif method.server_streaming:
            list(channel.unary_stream(path, **identity)(request, metadata=metadata, timeout=10))
        else:
            channel.unary_unary(path, **identity)(request, metadata=metadata, timeout=10)
    except grpc.RpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


@pytest.fixture(scope="module")
def address(shared_manager):
    proc = shared_manager.start_workers(procs=1, node="auth-node")
    try:
        (online,) = wait_for(
            lambda: [w for w in shared_manager.workers() if w["node"] == "auth-node"] or None,
            timeout=30,
            what="a worker online",
        )
        yield online["address"]
    finally:
        proc.terminate()
        proc.wait(15)


@pytest.mark.parametrize("method", list(SERVICE.methods), ids=lambda m: m.name)
def test_every_worker_method_refuses_a_missing_or_wrong_secret(address, method):
    with grpc.insecure_channel(address) as channel:
        for metadata in (
            None,
            worker_metadata("wrong-secret-of-the-right-length"),
            (("authorization", WORKER_RPC_SECRET),),  # not "Bearer <secret>"
            (("authorization", "Bearer "),),
        ):
            assert _call(channel, method, metadata) == grpc.StatusCode.UNAUTHENTICATED, metadata


def test_health_stays_open_reflection_is_off_and_the_secret_opens_the_service(address):
    with grpc.insecure_channel(address) as channel:
        health = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=5
        )
        assert health.status == health_pb2.HealthCheckResponse.SERVING
        reflection = reflection_pb2_grpc.ServerReflectionStub(channel).ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]),
            metadata=worker_metadata(),
            timeout=5,
        )
        with pytest.raises(grpc.RpcError) as refused:
            list(reflection)
        assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED
        info_call = channel.unary_unary(
            f"/{SERVICE.full_name}/GetInfo",
            request_serializer=worker_pb2.GetInfoRequest.SerializeToString,
            response_deserializer=worker_pb2.WorkerInfo.FromString,
        )
        info = info_call(worker_pb2.GetInfoRequest(), metadata=worker_metadata(), timeout=5)
    assert info.address == address and info.worker_id > 0


def _register(manager, **fields):

    body = {"node": "ghost", "pid": 4242, "capacity": 10**9, "version": "0.1.0"}
    body.update({"rpc_secret": "a-secret-the-worker-never-saw", **fields})
    return httpx.post(
        f"{manager.url}/api/workers/register",
        json=body,
        headers={"Authorization": f"Bearer {manager.join_token}"},
        timeout=30,
    )


def test_a_registration_is_refused_unless_the_address_answers_with_its_secret(
    shared_manager, address
):
    before = shared_manager.workers()
    # A ghost claiming a live worker's address (with a huge capacity) is refused: 409.
    ghost = _register(shared_manager, address=address)
    assert ghost.status_code == 409, ghost.text
    assert address in ghost.json()["detail"] and "rpc_secret" in ghost.json()["detail"]
    # The right secret but someone else's pid: the process there is not the one registering.
    impostor = _register(shared_manager, address=address, rpc_secret=WORKER_RPC_SECRET)
    assert impostor.status_code == 409, impostor.text
    assert "not pid 4242" in impostor.json()["detail"]
    # Nothing listens there: 503, so a real worker would retry.
    nowhere = _register(shared_manager, address=f"127.0.0.1:{free_port()}")
    assert nowhere.status_code == 503, nowhere.text
    assert (
        "cannot reach" in nowhere.json()["detail"] and "advertise-host" in nowhere.json()["detail"]
    )
    after = shared_manager.workers()
    assert {w["id"] for w in after} == {w["id"] for w in before}
    assert {w["capacity"] for w in after} == {w["capacity"] for w in before}


async def test_the_manager_drives_workers_with_their_own_secrets_across_its_restart(
    manager_factory, postgres_url
):
    """Workers with secrets of their own (as in production): the manager deploys to them and,
    restarted, still cleans them up (it reads the secrets back from the store); nobody else can
    call them."""
    manager = manager_factory(database_url=postgres_url).start()
    manager.start_workers(procs=2, rpc_secret=None)

    def two_online():
        online = [w for w in manager.workers() if w["state"] == "online"]
        return online if len(online) == 2 else None

    workers = wait_for(two_online, timeout=30, what="two workers online")
    pid = deploy(manager, size=500)
    with manager.api() as api:
        # The workers' own heartbeats say they host the agents the manager created on them.
        wait_for(
            lambda: sum(w["agents"] for w in api.get("/api/workers").json()["items"]) == 500,
            30,
            what="500 agents reported by the workers",
        )
    for worker in workers:
        async with worker_client(worker["address"]) as client:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await client.info()
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED

    manager.stop()
    manager.start()
    with manager.api() as api:
        assert api.delete(f"/api/populations/{pid}").status_code in (200, 202, 204)
        wait_for(
            lambda: api.get(f"/api/populations/{pid}").json()["status"] == "deleted",
            60,
            what="deleted after the restart",
        )
        # The workers report (in their heartbeats) that the manager really removed the agents.
        wait_for(
            lambda: all(w["agents"] == 0 for w in api.get("/api/workers").json()["items"]),
            30,
            what="agents removed from the workers",
        )


def test_a_heartbeat_with_another_registrations_lease_is_told_to_register_again(
    shared_manager, address
):

    (worker,) = [w for w in shared_manager.workers() if w["address"] == address]
    beat = {"agents": 0, "capacity": 1, "cpu_percent": 0, "rss_bytes": 1, "lease": "stale"}
    resp = httpx.post(
        f"{shared_manager.url}/api/workers/{worker['id']}/heartbeat",
        json=beat,
        headers={"Authorization": f"Bearer {shared_manager.join_token}"},
        timeout=10,
    )
    assert resp.status_code == 409, resp.text
    assert "register again" in resp.json()["detail"]
    # The worker itself is untouched: still online with its own stats.
    (after,) = [w for w in shared_manager.workers() if w["id"] == worker["id"]]
    assert after["state"] == "online" and after["capacity"] == worker["capacity"]
