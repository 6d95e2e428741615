"""A worker's load history and its recent log lines through the manager's REST API, with real
manager and worker processes (and a real OpenAI-compatible server for the LLM request rate)."""

from __future__ import annotations

import asyncio
import os
import signal

import grpc
import httpx
import pytest

from tests.support import stop_process, wait_for, worker_client, worker_metadata
from tests.support_completion_server import CompletionServer, make_config
from worker_server.rpc import worker_pb2 as pb

# One point per second, so two beats make two points within seconds.
FAST_HISTORY = {"POPULACE_HISTORY_BUCKET_S": "1"}


@pytest.fixture
def cluster(manager_factory):
    manager = manager_factory(extra_env=FAST_HISTORY).start()
    node = manager.start_workers(procs=2)
    workers = wait_for(
        lambda: (
            (ws := [w for w in manager.workers() if w["state"] == "online"]) and len(ws) == 2 and ws
        ),
        timeout=30,
        what="two workers online",
    )
    return manager, node, workers


def _get(manager, path: str, **params) -> httpx.Response:
    with manager.api() as api:
        return api.get(path, params=params)


def test_history_fills_from_heartbeats_and_counts_llm_requests(cluster):
    manager, _node, workers = cluster
    worker_id = workers[0]["id"]

    def points():
        resp = _get(manager, f"/api/workers/{worker_id}/history")
        assert resp.status_code == 200, resp.text
        return resp.json()

    body = wait_for(lambda: (b := points()) and len(b["points"]) >= 2 and b, 30, what="2 points")
    assert body["worker_id"] == worker_id and body["bucket_s"] == 1.0
    assert body["window_s"] == 3600.0
    first = body["points"][0]
    assert set(first) == {"t", "cpu_percent", "rss_bytes", "agents", "llm_requests_per_s"}
    assert first["t"].endswith("Z") and first["rss_bytes"] > 10_000_000
    assert [p["t"] for p in body["points"]] == sorted(p["t"] for p in body["points"])
    # A worker of this version reports its counter: a rate (0 while idle) once it beat twice.
    assert body["points"][-1]["llm_requests_per_s"] == 0.0

    cluster_body = wait_for(
        lambda: (
            (b := _get(manager, "/api/cluster/history").json())
            and any(p["workers"] == 2 for p in b["points"])
            and b
        ),
        30,
        what="cluster totals of two workers",
    )
    both = next(p for p in cluster_body["points"] if p["workers"] == 2)
    assert both["rss_bytes"] > 2 * 10_000_000 and both["agents"] == 0

    # LLM personas for 40 agents: 40 requests leave the workers, and the rate shows them.
    with CompletionServer() as server:
        with manager.api() as api:
            config = make_config(server.url, 40)
            resp = api.post("/api/populations", json=config.model_dump(mode="json"))
            assert resp.status_code == 202, resp.text
        wait_for(
            lambda: any(
                (p["llm_requests_per_s"] or 0) > 0
                for p in _get(manager, "/api/cluster/history").json()["points"]
            ),
            60,
            what="a cluster LLM request rate above 0",
        )
        assert len(server.bodies) >= 40
    rates = [
        p["llm_requests_per_s"] or 0
        for w in workers
        for p in _get(manager, f"/api/workers/{w['id']}/history").json()["points"]
    ]
    assert max(rates) > 0
    # The agents the deploy placed show in the totals at the next beats.
    wait_for(
        lambda: _get(manager, "/api/cluster/history").json()["points"][-1]["agents"] == 40,
        30,
        what="40 agents in the cluster totals",
    )


def test_logs_come_from_the_worker_process(cluster):
    manager, node, workers = cluster
    worker_id = workers[0]["id"]
    resp = _get(manager, f"/api/workers/{worker_id}/logs")
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["worker_id"] == worker_id and body["capacity"] == 2000
    messages = [line["message"] for line in body["lines"]]
    assert any(m.startswith("serving gRPC on ") for m in messages), messages
    line = body["lines"][0]
    assert set(line) == {"sequence", "time", "level", "logger", "message"}
    assert line["level"] == "INFO" and line["time"].endswith("Z")
    sequences = [x["sequence"] for x in body["lines"]]
    assert sequences == sorted(sequences) and body["last_sequence"] >= sequences[-1]

    # Following: only lines after the last one seen; a level filter leaves out the INFO lines.
    after = _get(manager, f"/api/workers/{worker_id}/logs", after=body["last_sequence"])
    assert after.status_code == 200
    assert all(x["sequence"] > body["last_sequence"] for x in after.json()["lines"])
    errors = _get(manager, f"/api/workers/{worker_id}/logs", level="error").json()
    assert all(x["level"] in ("ERROR", "CRITICAL") for x in errors["lines"])
    assert not any(x["message"].startswith("serving gRPC") for x in errors["lines"])
    one = _get(manager, f"/api/workers/{worker_id}/logs", limit=1).json()
    assert len(one["lines"]) == 1 and one["lines"][0]["sequence"] >= sequences[-1]

    # The worker gone: the manager says so instead of hanging or failing with a 500.
    stop_process(node)
    wait_for(
        lambda: (
            _get(manager, f"/api/workers/{worker_id}").json()["state"] in ("offline", "removed")
        ),
        30,
        what="worker offline",
    )
    state = _get(manager, f"/api/workers/{worker_id}").json()["state"]
    gone = _get(manager, f"/api/workers/{worker_id}/logs")
    # Offline may come back (503, try again); removed never does (410, with the reason).
    if state == "removed":
        assert gone.status_code == 410
        assert f"worker {worker_id} was removed" in gone.json()["detail"]
    else:
        assert gone.status_code == 503
        assert f"worker {worker_id} is" in gone.json()["detail"]


def test_history_and_logs_need_a_token_and_a_known_worker_and_a_sane_limit(manager):
    for path in ("/api/workers/1/history", "/api/workers/1/logs", "/api/cluster/history"):
        assert httpx.get(f"{manager.url}{path}", timeout=10).status_code == 401
        wrong = httpx.get(
            f"{manager.url}{path}", headers={"Authorization": "Bearer nope"}, timeout=10
        )
        assert wrong.status_code == 401
    for path in ("/api/workers/999/history", "/api/workers/999/logs"):
        resp = _get(manager, path)
        assert resp.status_code == 404, resp.text
        assert resp.json()["detail"]
    assert _get(manager, "/api/cluster/history").json()["points"] == []
    for params, field in [
        ({"limit": 0}, "limit"),
        ({"limit": 2001}, "limit"),
        ({"limit": "many"}, "limit"),
        ({"level": "verbose"}, "level"),
        ({"after": -1}, "after"),
    ]:
        resp = _get(manager, "/api/workers/1/logs", **params)
        assert resp.status_code == 422, (params, resp.text)
        assert resp.json()["detail"][0]["loc"] == ["query", field]
    # The viewer token reads them too.
    viewer = httpx.get(
        f"{manager.url}/api/cluster/history",
        headers={"Authorization": f"Bearer {manager.viewer_token}"},
        timeout=10,
    )
    assert viewer.status_code == 200


def test_a_worker_that_does_not_answer_is_a_503_and_bad_rpc_arguments_are_refused(
    manager_factory,
):
    # A long TTL: the stopped worker stays online, so the manager really asks it.
    manager = manager_factory(extra_env={"POPULACE_WORKER_TTL_S": "120"}).start()
    manager.start_workers(procs=1)
    [worker] = wait_for(
        lambda: (ws := manager.workers(state="online")) and len(ws) == 1 and ws,
        30,
        what="a worker online",
    )

    async def recent_logs(**fields):
        async with worker_client(worker["address"]) as client:
            return await client.stub.RecentLogs(
                pb.RecentLogsRequest(**fields), metadata=worker_metadata(), timeout=10
            )

    with pytest.raises(grpc.aio.AioRpcError) as refused:
        asyncio.run(recent_logs(limit=-1))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.details() == "limit must be >= 0"
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        asyncio.run(recent_logs(after_sequence=-5))
    assert refused.value.details() == "after_sequence must be >= 0"
    default = asyncio.run(recent_logs())
    assert default.capacity == 2000 and default.lines and default.first_sequence == 1

    os.kill(worker["pid"], signal.SIGSTOP)
    try:
        resp = _get(manager, f"/api/workers/{worker['id']}/logs")
    finally:
        os.kill(worker["pid"], signal.SIGCONT)
    assert resp.status_code == 503, resp.text
    assert resp.json()["detail"].startswith(
        f"worker {worker['id']} at {worker['address']} did not answer ("
    )
