"""The cluster's "Load over time" is the sum of the workers' own series, bucket by bucket, with a
real manager, two real worker processes and real LLM traffic (the workers write personas
against an OpenAI-compatible server of the test's own).

The issue it guards: during an LLM run each worker logged ~56 requests/s and 3.5 % CPU in a
bucket while the cluster chart showed 0 and 1 % (it kept the last beat's levels, not the
bucket's)."""

from __future__ import annotations

import time
from datetime import datetime

import pytest

from tests.support import wait_for
from tests.support_completion_server import CompletionServer, make_config

BUCKET_S = 2.0
FIELDS = ("cpu_percent", "rss_bytes", "agents", "llm_requests_per_s")
# Beats four times a bucket: each worker has a point in (nearly) every bucket.
FAST = {"POPULACE_HISTORY_BUCKET_S": str(BUCKET_S), "POPULACE_HEARTBEAT_INTERVAL_S": "0.5"}


def _get(manager, path: str) -> dict:
    with manager.api() as api:
        resp = api.get(path)
    assert resp.status_code == 200, resp.text
    return resp.json()


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _values(point: dict) -> tuple[float, ...]:
    return tuple(float(point[f] or 0.0) for f in FIELDS)


def _summed(series: list[list[dict]], at: str) -> tuple[int, int, tuple[float, ...]]:
    """The workers' series summed at bucket `at`: (workers counted, workers with a point in it,
    sums). A live worker silent in the bucket counts with its previous point (the contract)."""
    counted = own = 0
    sums = [0.0] * len(FIELDS)
    for points in series:
        before = [p for p in points if _epoch(p["t"]) <= _epoch(at)]
        if not before:
            continue  # not registered yet
        counted += 1
        own += before[-1]["t"] == at
        for i, value in enumerate(_values(before[-1])):
            sums[i] += value
    return counted, own, tuple(sums)


@pytest.fixture
def loaded_cluster(manager_factory):
    manager = manager_factory(extra_env=FAST).start()
    manager.start_workers(procs=2)
    workers = wait_for(
        lambda: (ws := manager.workers(state="online")) and len(ws) == 2 and ws,
        30,
        what="two workers online",
    )
    return manager, workers


def test_the_cluster_series_is_the_sum_of_the_workers_series_under_llm_load(loaded_cluster):
    manager, workers = loaded_cluster
    # 240 LLM personas, 4 requests at a time per worker, each answered after 0.1 s: about three
    # seconds of requests on each worker, over several buckets.
    with CompletionServer() as server:
        server.behaviour.delay_s = 0.1
        config = make_config(server.url, 240, max_concurrency=4).model_dump(mode="json")
        with manager.api() as api:
            resp = api.post("/api/populations", json=config)
            assert resp.status_code == 202, resp.text
            population_id = resp.json()["id"]
        wait_for(
            lambda: _get(manager, f"/api/populations/{population_id}")["status"] == "deployed",
            90,
            what="the population deployed",
        )
        assert len(server.bodies) >= 240
    # Two more buckets, so the last loaded ones are closed (no beat lands in them any more).
    time.sleep(2 * BUCKET_S + 0.5)

    read_at = time.time()
    cluster = _get(manager, "/api/cluster/history")
    series = [_get(manager, f"/api/workers/{w['id']}/history")["points"] for w in workers]
    assert cluster["bucket_s"] == BUCKET_S
    assert all(
        all(p["t"] in {c["t"] for c in cluster["points"]} for p in points) for points in series
    ), "the workers' buckets are the cluster's buckets"

    compared = loaded = both = 0
    for point in cluster["points"]:
        if _epoch(point["t"]) + BUCKET_S > read_at - 0.1:
            continue  # still open when the series were read
        counted, own, sums = _summed(series, point["t"])
        assert point["workers"] == counted, point
        assert _values(point) == pytest.approx(sums, rel=1e-9, abs=1e-6), point["t"]
        compared += 1
        both += own == 2
        loaded += point["llm_requests_per_s"] > 0
    assert compared >= 5, cluster["points"]
    # Nearly every bucket holds a point of each worker: the sums are of the same buckets.
    assert both >= compared - 2, (both, compared)
    # The load shows in the cluster as in the workers, in more than one bucket.
    assert loaded >= 2, cluster["points"]
    peak = max(cluster["points"], key=lambda p: p["llm_requests_per_s"])
    worker_peak = max(p["llm_requests_per_s"] or 0 for points in series for p in points)
    assert peak["llm_requests_per_s"] >= worker_peak > 0
    # The deployed agents are in the totals: 240 over the two workers.
    assert cluster["points"][-1]["agents"] == 240
