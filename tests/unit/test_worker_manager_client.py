"""The worker-plane HTTP client maps each manager answer to one typed outcome."""

import json

import httpx
import pytest

from worker_server.manager_client import (
    HeartbeatReport,
    JoinTokenRejected,
    ManagerClient,
    ManagerRejected,
    ManagerUnavailable,
    UnknownWorker,
    WorkerRemoved,
)

REPORT = HeartbeatReport(
    agents=0, capacity=10, cpu_percent=1.5, rss_bytes=100, inflight_llm_calls=0
)


def client_answering(status: int, body=None, seen: list | None = None) -> ManagerClient:
    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        if body is None:
            return httpx.Response(status)
        return httpx.Response(status, json=body)

    return ManagerClient("http://mgr:8000/", "tok", transport=httpx.MockTransport(handler))


async def register(client: ManagerClient):
    return await client.register(
        node="n1", address="127.0.0.1:5000", pid=42, capacity=10, version="0.1.0"
    )


async def test_register_sends_json_with_the_join_token_and_parses_the_answer():
    seen: list[httpx.Request] = []
    async with client_answering(
        201, {"id": 7, "heartbeat_interval_s": 0.5, "ttl_s": 2.0}, seen
    ) as client:
        registration = await register(client)
    assert (registration.worker_id, registration.heartbeat_interval_s, registration.ttl_s) == (
        7,
        0.5,
        2.0,
    )
    request = seen[0]
    assert request.url == "http://mgr:8000/api/workers/register"
    assert request.headers["authorization"] == "Bearer tok"
    assert request.headers["content-type"] == "application/json"
    assert json.loads(request.content) == {
        "node": "n1",
        "address": "127.0.0.1:5000",
        "pid": 42,
        "capacity": 10,
        "version": "0.1.0",
    }


async def test_heartbeat_posts_the_stats_and_returns_the_state():
    seen: list[httpx.Request] = []
    async with client_answering(200, {"state": "draining"}, seen) as client:
        assert await client.heartbeat(7, REPORT) == "draining"
    assert seen[0].url.path == "/api/workers/7/heartbeat"
    assert json.loads(seen[0].content) == {
        "agents": 0,
        "capacity": 10,
        "cpu_percent": 1.5,
        "rss_bytes": 100,
        "inflight_llm_calls": 0,
    }


@pytest.mark.parametrize(
    "status, body, error",
    [
        (401, {"detail": "invalid join token"}, JoinTokenRejected),
        (404, {"detail": "unknown worker 7: register again"}, UnknownWorker),
        (410, {"detail": "worker 7 was removed"}, WorkerRemoved),
        (500, {"detail": "boom"}, ManagerUnavailable),
        (503, None, ManagerUnavailable),
        (429, None, ManagerUnavailable),
        (422, {"detail": [{"loc": ["body", "agents"]}]}, ManagerRejected),
    ],
)
async def test_heartbeat_outcomes(status, body, error):
    async with client_answering(status, body) as client:
        with pytest.raises(error):
            await client.heartbeat(7, REPORT)


async def test_join_token_rejection_keeps_the_managers_reason():
    async with client_answering(401, {"detail": "invalid join token"}) as client:
        with pytest.raises(JoinTokenRejected, match="401 invalid join token"):
            await register(client)


async def test_404_on_register_is_a_wrong_url_not_an_unknown_worker():
    async with client_answering(404, {"detail": "Not Found"}) as client:
        with pytest.raises(ManagerRejected) as info:
            await register(client)
    assert info.value.status_code == 404


async def test_422_names_the_field():
    detail = [{"loc": ["body", "pid"], "msg": "Input should be greater than 0"}]
    async with client_answering(422, {"detail": detail}) as client:
        with pytest.raises(ManagerRejected, match="pid") as info:
            await register(client)
    assert info.value.detail == detail


async def test_connection_errors_mean_unavailable():
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    async with ManagerClient("http://mgr", "tok", transport=httpx.MockTransport(refuse)) as client:
        with pytest.raises(ManagerUnavailable, match="ConnectError"):
            await register(client)


@pytest.mark.parametrize(
    "body", [["not", "an", "object"], {"id": 1}, {"id": 1, "heartbeat_interval_s": 0, "ttl_s": 3}]
)
async def test_an_unusable_registration_answer_is_not_trusted(body):
    async with client_answering(201, body) as client:
        with pytest.raises(ManagerUnavailable):
            await register(client)


async def test_html_instead_of_json_is_unavailable():
    def html(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html>proxy</html>")

    async with ManagerClient("http://mgr", "tok", transport=httpx.MockTransport(html)) as client:
        with pytest.raises(ManagerUnavailable, match="non-JSON"):
            await register(client)


@pytest.mark.parametrize("status", [204, 404, 410])
async def test_deregister_is_idempotent(status):
    seen: list[httpx.Request] = []
    async with client_answering(status, None, seen) as client:
        await client.deregister(7)
    assert seen[0].url.path == "/api/workers/7/deregister"
    assert seen[0].content == b""


async def test_deregister_with_a_bad_token_raises():
    async with client_answering(401, {"detail": "invalid join token"}) as client:
        with pytest.raises(JoinTokenRejected):
            await client.deregister(7)
