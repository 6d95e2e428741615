"""Prometheus metrics from a real cluster: a manager and a node of two worker processes, each
serving /metrics on its own port, play an LLM simulation against the tests' OpenAI-compatible
server; the scrapes show the rounds, decisions, LLM requests and tokens moving, and the
manager's endpoint answers only with a token."""

from __future__ import annotations

import os
import socket

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bench.openai_server import OpenAIServer
from tests.support import Manager, free_port, reset_postgres, stop_process, wait_for
from tests.support_simulations import deploy, finish, rounds_of, start

MODEL = "test-model"
PROCS = 2
Samples = list[tuple[str, dict[str, str], float]]


def _free_port_pair() -> int:
    """A port P with P+1 free too: the node's processes serve metrics on P and P+1."""
    for _ in range(50):
        base = free_port()
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", base + 1))
            except OSError:
                continue
        return base
    raise AssertionError("no two consecutive free ports")


def parse(text: str) -> Samples:
    return [
        (s.name, s.labels, s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels`."""
    return sum(
        value
        for sample, have, value in samples
        if sample == name and all(have.get(k) == v for k, v in labels.items())
    )


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def cluster(request, tmp_path_factory):
    """A manager on each store (commit times come from either driver's transactions) with a
    node of two processes serving metrics on consecutive ports."""
    tmp = tmp_path_factory.mktemp(f"metrics-{request.param}")
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp}/populace.db"
    else:
        url = request.getfixturevalue("postgres_server_url")
        reset_postgres(url)
    manager = Manager(
        tmp=tmp,
        database_url=url,
        extra_env={"POPULACE_METRICS_TOKEN": "test-metrics-token-" + os.urandom(6).hex()},
    ).start()
    base = _free_port_pair()
    node = manager.start_workers(procs=PROCS, env={"POPULACE_METRICS_PORT": str(base)})
    try:
        wait_for(
            lambda: len([w for w in manager.workers() if w["state"] == "online"]) == PROCS,
            30,
            what=f"{PROCS} workers online",
        )
        yield manager, [f"http://127.0.0.1:{base + i}/metrics" for i in range(PROCS)]
    finally:
        stop_process(node)
        manager.stop()


def scrape_manager(manager: Manager, token: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return httpx.get(f"{manager.url}/api/metrics", headers=headers, timeout=10)


def manager_samples(manager: Manager) -> Samples:
    resp = scrape_manager(manager, manager.extra_env["POPULACE_METRICS_TOKEN"])
    assert resp.status_code == 200, resp.text
    return parse(resp.text)


def worker_samples(url: str) -> Samples:
    resp = httpx.get(url, timeout=10)
    assert resp.status_code == 200, resp.text
    return parse(resp.text)


def test_the_manager_endpoint_wants_a_token_and_the_metrics_token_reads_nothing_else(cluster):
    manager, _ = cluster
    metrics_token = manager.extra_env["POPULACE_METRICS_TOKEN"]
    assert scrape_manager(manager, None).status_code == 401
    assert scrape_manager(manager, "not-a-token").status_code == 401
    for token in (manager.api_token, manager.viewer_token, metrics_token):
        resp = scrape_manager(manager, token)
        assert resp.status_code == 200, resp.text
        assert resp.headers["content-type"].startswith("text/plain")
        assert "populace_rounds_finished_total" in resp.text
    # Only /api/metrics: the metrics token opens no other route.
    other = httpx.get(
        f"{manager.url}/api/workers",
        headers={"Authorization": f"Bearer {metrics_token}"},
        timeout=10,
    )
    assert other.status_code == 401


def test_a_round_moves_the_series_of_the_manager_and_of_both_workers(cluster):
    manager, worker_urls = cluster
    # The cluster as the store sees it, with both workers online.
    wait_for(
        lambda: (
            total(manager_samples(manager), "populace_cluster_workers", state="online") == PROCS
        ),
        30,
        what="two online workers in the manager's metrics",
    )
    before = manager_samples(manager)
    assert total(before, "populace_rounds_finished_total") == 0
    assert total(before, "populace_store_up") == 1
    assert total(before, "process_resident_memory_bytes") > 0

    pid = deploy(manager, size=60)
    for url in worker_urls:  # placement by free room: both processes host agents
        assert total(worker_samples(url), "populace_worker_agents") > 0, url
        assert total(worker_samples(url), "populace_worker_capacity") > 0, url
    # The store says deployed a moment before the event the metrics count is published.
    deployed = wait_for(
        lambda: (
            (s := manager_samples(manager))
            and total(s, "populace_deploys_total", outcome="deployed") == 1
            and s
        ),
        10,
        what="the deploy counted",
    )
    assert total(deployed, "populace_agents_deployed_total") == 60
    assert total(deployed, "populace_populations", status="deployed") == 1
    assert total(deployed, "populace_db_commit_seconds_count") > 0

    with OpenAIServer(model=MODEL) as server, manager.api() as api:
        config = {
            "population_id": pid,
            "rounds": 2,
            "rule": {"preset": "2/3"},
            "prompt": {"system": "roleplay", "user": "basic"},
            "policy": {
                "kind": "llm",
                "endpoints": [{"base_url": server.base_url, "model": MODEL}],
            },
            "deadlines": {"agent_s": 30},
            "seed": 5,
        }
        sid = start(api, config)["id"]
        done = finish(api, sid, timeout=120)
        assert done["status"] == "completed", done
        kept = rounds_of(api, sid)
        asked = server.requests

    after = wait_for(
        lambda: (
            (s := manager_samples(manager))
            and total(s, "populace_runs_ended_total", status="completed") == 1
            and s
        ),
        10,
        what="the run's end counted",
    )
    assert total(after, "populace_rounds_finished_total") == 2
    assert total(after, "populace_rounds_started_total") == 2
    assert total(after, "populace_round_duration_seconds_count") == 2
    assert total(after, "populace_decisions_total") == 120
    assert total(after, "populace_decisions_total", status="valid") == sum(
        r["n_valid"] for r in kept
    )
    endpoint = {"base_url": server.base_url, "model": MODEL}
    requests = total(after, "populace_llm_requests_total", **endpoint)
    assert 0 < requests <= asked
    assert total(after, "populace_llm_latency_seconds_count", **endpoint) > 0
    prompt = total(after, "populace_llm_tokens_total", kind="prompt", **endpoint)
    assert prompt == sum(r["prompt_tokens"] for r in kept) > 0
    assert total(after, "populace_llm_tokens_total", kind="completion", **endpoint) > 0
    wait_for(
        lambda: total(manager_samples(manager), "populace_heartbeat_gap_seconds_count") > 0,
        15,
        what="heartbeat gaps observed",
    )

    # Each worker counted its own part: together, what the manager merged.
    workers = [worker_samples(url) for url in worker_urls]
    for samples in workers:
        assert total(samples, "populace_worker_rounds_total") == 2
        assert total(samples, "populace_worker_llm_requests_total", **endpoint) > 0
        assert total(samples, "process_cpu_seconds_total") > 0
    assert sum(total(s, "populace_worker_decisions_total") for s in workers) == 120
    assert sum(total(s, "populace_worker_llm_requests_total", **endpoint) for s in workers) == (
        requests
    )
    assert (
        sum(
            total(s, "populace_worker_llm_tokens_total", kind="prompt", **endpoint) for s in workers
        )
        == prompt
    )
