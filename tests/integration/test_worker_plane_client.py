"""The worker-plane HTTP client against the real manager: each answer maps to one typed outcome.

Every outcome the manager can give comes from a real `populace manager` process. Answers the
manager never gives on purpose (5xx, HTML, an unusable body) come from a small real HTTP server
of the test's own, as a reverse proxy or a wrong service at the manager's URL would send them.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import grpc
import pytest

from tests.support import free_port
from worker_server.manager_client import (
    HeartbeatReport,
    JoinTokenRejected,
    ManagerClient,
    ManagerRejected,
    ManagerUnavailable,
    UnknownWorker,
    WorkerRemoved,
)
from worker_server.rpc import worker_pb2

REPORT = HeartbeatReport(
    agents=3, capacity=10, cpu_percent=1.5, rss_bytes=12345, inflight_llm_calls=2
)
NEVER_REGISTERED = 987_654_321


class GetInfoServer:
    """A real gRPC server that answers GetInfo as whichever process's secret it is shown: the
    manager checks every registration there, so each registration here is a process of its own
    (pid, node) at one address, like a worker restarted on its port."""

    def __init__(self) -> None:
        self.identities: dict[str, worker_pb2.WorkerInfo] = {}
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self._server.add_generic_rpc_handlers(
            [
                grpc.method_handlers_generic_handler(
                    "populace.v1.WorkerService",
                    {
                        "GetInfo": grpc.unary_unary_rpc_method_handler(
                            self._get_info,
                            request_deserializer=worker_pb2.GetInfoRequest.FromString,
                            response_serializer=worker_pb2.WorkerInfo.SerializeToString,
                        )
                    },
                )
            ]
        )
        self.address = f"127.0.0.1:{self._server.add_insecure_port('127.0.0.1:0')}"

    def _get_info(self, request, context):
        auth = dict(context.invocation_metadata()).get("authorization", "")
        info = self.identities.get(auth.removeprefix("Bearer "))
        if info is None:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "invalid credentials")
        return info

    def __enter__(self) -> GetInfoServer:
        self._server.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.stop(0)


@pytest.fixture(scope="module")
def info_server() -> Iterator[GetInfoServer]:
    with GetInfoServer() as server:
        yield server


_SERVER: GetInfoServer | None = None


@pytest.fixture(autouse=True)
def _answering(info_server):
    global _SERVER
    _SERVER = info_server
    yield
    _SERVER = None


async def register(client: ManagerClient, **overrides):
    secret = "secret-" + os.urandom(8).hex()
    fields = {
        "node": "n1",
        "address": _SERVER.address if _SERVER else "127.0.0.1:5000",
        "pid": int.from_bytes(os.urandom(2)) + 100,
        "capacity": 10,
        "version": "0.1.0",
        "rpc_secret": secret,
        **overrides,
    }
    if _SERVER is not None:
        _SERVER.identities[secret] = worker_pb2.WorkerInfo(
            node=fields["node"], pid=max(fields["pid"], 0), capacity=fields["capacity"]
        )
    return await client.register(**fields)


def stored(manager, worker_id: int) -> dict:
    with manager.api() as api:
        resp = api.get(f"/api/workers/{worker_id}")
    assert resp.status_code == 200, resp.text
    return resp.json()


@contextlib.contextmanager
def http_server_answering(
    status: int, body: bytes = b"", content_type: str = "text/html"
) -> Iterator[str]:
    """A real HTTP server on a free port that answers every POST with one fixed response."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


# The real manager: 201, 200, 401, 404, 410, 422, 405 and 204.


async def test_register_is_stored_as_sent_and_the_answer_parsed(shared_manager, info_server):
    node = f"node-{os.urandom(4).hex()}"
    # A trailing slash on the manager URL is tolerated.
    async with ManagerClient(shared_manager.url + "/", shared_manager.join_token) as client:
        registration = await register(client, node=node, pid=4242)
    assert registration.worker_id > 0
    # The manager's defaults (1 s heartbeats, 3 s TTL) come back through the answer.
    assert (registration.heartbeat_interval_s, registration.ttl_s) == (1.0, 3.0)
    row = stored(shared_manager, registration.worker_id)
    assert {k: row[k] for k in ("node", "address", "pid", "capacity", "version", "state")} == {
        "node": node,
        "address": info_server.address,
        "pid": 4242,
        "capacity": 10,
        "version": "0.1.0",
        "state": "online",
    }


async def test_heartbeat_records_the_stats_and_returns_the_managers_state(shared_manager):
    async with ManagerClient(shared_manager.url, shared_manager.join_token) as client:
        registration = await register(client)
        worker_id = registration.worker_id
        answer = await client.heartbeat(worker_id, REPORT)
        assert answer.state == "online"
        # The manager says which cadence to keep (it grows with the fleet).
        assert answer.heartbeat_interval_s >= registration.heartbeat_interval_s > 0
        assert answer.ttl_s > answer.heartbeat_interval_s
        row = stored(shared_manager, worker_id)
        assert {k: row[k] for k in ("agents", "capacity", "cpu_percent", "rss_bytes")} == {
            "agents": 3,
            "capacity": 10,
            "cpu_percent": 1.5,
            "rss_bytes": 12345,
        }
        assert row["inflight_llm_calls"] == 2

        with shared_manager.api() as api:
            assert api.post(f"/api/workers/{worker_id}/drain").status_code == 200
        assert (await client.heartbeat(worker_id, REPORT)).state == "draining"


async def test_a_wrong_join_token_is_rejected_with_the_managers_reason(shared_manager):
    async with ManagerClient(shared_manager.url, shared_manager.join_token) as good:
        worker_id = (await register(good)).worker_id
    async with ManagerClient(shared_manager.url, "not-the-join-token") as client:
        with pytest.raises(JoinTokenRejected, match="^401 invalid join token$"):
            await register(client)
        with pytest.raises(JoinTokenRejected, match="401"):
            await client.heartbeat(worker_id, REPORT)
        with pytest.raises(JoinTokenRejected, match="401"):
            await client.deregister(worker_id)
    assert stored(shared_manager, worker_id)["state"] == "online", "the rejected calls did nothing"


async def test_heartbeat_for_an_id_the_manager_never_knew_means_register_again(shared_manager):
    async with ManagerClient(shared_manager.url, shared_manager.join_token) as client:
        with pytest.raises(UnknownWorker, match=f"404 unknown worker {NEVER_REGISTERED}"):
            await client.heartbeat(NEVER_REGISTERED, REPORT)


async def test_heartbeat_after_an_operator_removed_the_worker_is_410(shared_manager):
    async with ManagerClient(shared_manager.url, shared_manager.join_token) as client:
        worker_id = (await register(client)).worker_id
        with shared_manager.api() as api:
            assert api.delete(f"/api/workers/{worker_id}").status_code == 204
        with pytest.raises(WorkerRemoved, match=f"410 worker {worker_id} was removed"):
            await client.heartbeat(worker_id, REPORT)


async def test_invalid_input_is_rejected_with_the_field_named(shared_manager):
    async with ManagerClient(shared_manager.url, shared_manager.join_token) as client:
        with pytest.raises(ManagerRejected, match="pid") as info:
            await register(client, pid=-1)
        assert info.value.status_code == 422
        assert info.value.detail[0]["loc"] == ["body", "pid"]

        worker_id = (await register(client)).worker_id
        negative = HeartbeatReport(
            agents=-1, capacity=1, cpu_percent=0, rss_bytes=1, inflight_llm_calls=0
        )
        with pytest.raises(ManagerRejected, match="agents") as info:
            await client.heartbeat(worker_id, negative)
        assert info.value.status_code == 422


async def test_a_wrong_manager_url_is_rejected_not_taken_for_an_unknown_worker(shared_manager):
    async with ManagerClient(shared_manager.url + "/v2", shared_manager.join_token) as client:
        with pytest.raises(ManagerRejected) as info:
            await register(client)
    assert not isinstance(info.value, UnknownWorker)
    assert info.value.status_code == 405


async def test_deregister_is_idempotent(shared_manager):
    async with ManagerClient(shared_manager.url, shared_manager.join_token) as client:
        worker_id = (await register(client)).worker_id
        assert await client.deregister(worker_id) is None
        assert stored(shared_manager, worker_id)["state"] == "removed"
        await client.deregister(worker_id)  # already removed
        await client.deregister(NEVER_REGISTERED)  # never known
        with pytest.raises(WorkerRemoved):
            await client.heartbeat(worker_id, REPORT)


# Nothing listening, or something other than the manager answering.


async def test_connection_refused_means_unavailable():
    async with ManagerClient(f"http://127.0.0.1:{free_port()}", "tok") as client:
        with pytest.raises(ManagerUnavailable, match="ConnectError"):
            await register(client)
        with pytest.raises(ManagerUnavailable, match="ConnectError"):
            await client.heartbeat(7, REPORT)


@pytest.mark.parametrize(
    "status, body, content_type, message",
    [
        (500, b'{"detail": "boom"}', "application/json", "HTTP 500: boom"),
        (502, b"<html><h1>502 Bad Gateway</h1></html>", "text/html", "HTTP 502: <html>"),
        (503, b"", "text/plain", "HTTP 503"),
        (429, b"", "text/plain", "HTTP 429"),
    ],
)
async def test_a_failing_server_in_front_means_unavailable(status, body, content_type, message):
    with http_server_answering(status, body, content_type) as url:
        async with ManagerClient(url, "tok") as client:
            with pytest.raises(ManagerUnavailable, match=message):
                await client.heartbeat(7, REPORT)
            with pytest.raises(ManagerUnavailable, match=message):
                await register(client)


async def test_a_proxy_404_on_register_is_a_wrong_url_not_an_unknown_worker():
    with http_server_answering(404, b"<html>404 Not Found</html>") as url:
        async with ManagerClient(url, "tok") as client:
            with pytest.raises(ManagerRejected) as info:
                await register(client)
    assert info.value.status_code == 404


async def test_html_instead_of_json_is_unavailable():
    with http_server_answering(200, b"<html>proxy login</html>") as url:
        async with ManagerClient(url, "tok") as client:
            with pytest.raises(ManagerUnavailable, match="non-JSON"):
                await register(client)


@pytest.mark.parametrize(
    "body", [["not", "an", "object"], {"id": 1}, {"id": 1, "heartbeat_interval_s": 0, "ttl_s": 3}]
)
async def test_an_unusable_registration_answer_is_not_trusted(body):
    with http_server_answering(201, json.dumps(body).encode(), "application/json") as url:
        async with ManagerClient(url, "tok") as client:
            with pytest.raises(ManagerUnavailable):
                await register(client)


async def test_the_same_process_registering_twice_keeps_its_worker(shared_manager, info_server):
    """A registration whose answer was lost is sent again: the same process gets the same
    worker (a fresh lease), and another process verified at that address takes the place of
    the old one, which goes offline at once."""
    secret = "secret-" + os.urandom(8).hex()
    info_server.identities[secret] = worker_pb2.WorkerInfo(node="n-twice", pid=777, capacity=10)
    fields = dict(node="n-twice", pid=777, rpc_secret=secret)
    async with (
        ManagerClient(shared_manager.url, shared_manager.join_token) as first,
        ManagerClient(shared_manager.url, shared_manager.join_token) as second,
    ):
        once = await register(first, **fields)
        twice = await register(second, **fields)
        assert twice.worker_id == once.worker_id and twice.lease != once.lease
        with pytest.raises(UnknownWorker, match="409"):
            await first.heartbeat(once.worker_id, REPORT)
        assert (await second.heartbeat(twice.worker_id, REPORT)).state == "online"
        other = await register(second)
    assert other.worker_id != once.worker_id
    assert stored(shared_manager, once.worker_id)["state"] == "offline"
