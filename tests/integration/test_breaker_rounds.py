"""The LLM circuit breakers over a run's rounds, through the REST API: a real manager, two real
worker processes, and real OpenAI-compatible servers of the tests' own (bench/openai_server.py).

An endpoint that fails one prompt in ten every time (so a failing prompt's retries fail too)
must not have its breakers opened by those retries: every round completes at ~90 % valid. A
dead endpoint still pauses the run, and the reason tells failed requests from skipped ones. A
breaker's changes reach the run's timeline."""

from __future__ import annotations

import pytest

from bench.openai_server import OpenAIServer, rate_fault
from tests.support import running_cluster, wait_for
from tests.support_simulations import deploy, finish, rounds_of, start

MODEL = "test-model"
ENDED = {"completed", "failed", "cancelled", "paused"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("breaker-rounds")
    with running_cluster(tmp, f"sqlite+aiosqlite:///{tmp}/populace.db") as manager:
        yield manager


def _llm(pid: int, *base_urls: str, rounds: int, concurrency: int = 32, **policy) -> dict:
    return {
        "population_id": pid,
        "rounds": rounds,
        "rule": {"preset": "2/3"},
        "prompt": {"system": "roleplay", "user": "basic"},
        "policy": {
            "kind": "llm",
            "endpoints": [
                {"base_url": url, "model": MODEL, "max_concurrency": concurrency}
                for url in base_urls
            ],
            # One request per agent (each with the agent's seed): the fault hits one agent in
            # ten, not one of the population's five personas.
            "identical_prompts": "each_asks",
            **policy,
        },
        "deadlines": {"agent_s": 20},
        "seed": 3,
    }


def _timeline(api, sid: int) -> list[dict]:
    resp = api.get(f"/api/simulations/{sid}/timeline", params={"limit": 500})
    assert resp.status_code == 200, resp.text
    return resp.json()["items"]


def test_an_endpoint_failing_one_prompt_in_ten_completes_every_round_at_90_percent(cluster):
    n, rounds = 300, 3
    pid = deploy(cluster, size=n)
    with (
        OpenAIServer(model=MODEL, fault=rate_fault(fail_rate=0.1)) as server,
        cluster.api() as api,
    ):
        sid = start(api, _llm(pid, server.base_url, rounds=rounds))["id"]  # default retries
        done = wait_for(  # paused counts as an end here: today's breakers paused this run
            lambda: (s := api.get(f"/api/simulations/{sid}").json())["status"] in ENDED and s,
            180,
            what="the run to end",
        )
        assert done["status"] == "completed", done.get("pause_reason") or done.get("error")
        played = rounds_of(api, sid)
        assert [r["round"] for r in played] == [1, 2, 3]
        for r in played:
            assert 0.82 * n <= r["n_valid"] <= 0.97 * n, r
            assert r["n_valid"] + r["n_invalid"] == n
            (meter,) = r["endpoints"]
            assert meter["skipped"] == 0, "no request skipped: the breakers stayed closed"
            assert meter["breaker_opened"] == 0
            # The failing prompts were tried and retried (twice each by default).
            assert meter["errors"] == 3 * r["n_invalid"], meter
        assert server.stats()["by_status"].get("500", 0) > 0
        entries = wait_for(
            lambda: (e := _timeline(api, sid)) and e[-1]["kind"] == "completed" and e,
            30,
            what="the run's timeline",
        )
        assert len([e for e in entries if e["kind"] == "round"]) == rounds
        assert not [e for e in entries if e["data"].get("cause") == "llm_breaker"], entries


def test_a_dead_endpoint_pauses_the_run_and_counts_skipped_apart_from_failed(cluster):
    n = 200
    pid = deploy(cluster, size=n)
    with (
        OpenAIServer(model=MODEL, fault=rate_fault(fail_rate=1.0)) as server,
        cluster.api() as api,
    ):
        sid = start(api, _llm(pid, server.base_url, rounds=2, max_retries=1))["id"]
        paused = wait_for(
            lambda: (s := api.get(f"/api/simulations/{sid}").json())["status"] == "paused" and s,
            60,
            what="the run paused",
        )
        reason = paused["pause_reason"]
        assert rounds_of(api, sid) == [] and reason.startswith("round 1: "), reason
        sent = server.requests
        assert 0 < sent < n, "the breakers stopped the requests"
        assert f"failed {sent} of {sent} requests sent, and " in reason, reason
        skipped = int(reason.split(" requests sent, and ")[1].split(" more were skipped")[0])
        # Every agent's request was sent and failed, or skipped; a request whose retry was
        # skipped counts in both.
        assert 0 < skipped <= n and skipped + sent >= n, reason
        assert "because its circuit breaker was open" in reason
        assert f"failed {n}" not in reason and f"of {n + sent}" not in reason
        entries = wait_for(
            lambda: [e for e in _timeline(api, sid) if e["kind"] == "paused"] or None,
            30,
            what="the pause on the timeline",
        )
        assert entries[-1]["data"]["reason"] == reason


def test_breaker_changes_are_on_the_run_timeline(cluster):
    """Two endpoints, one answering only 500s: its breakers open in round 1 (the healthy one
    answers for it), go half-open at round 2's start, and open again on the failed trials."""
    n = 200
    pid = deploy(cluster, size=n)
    with (
        OpenAIServer(model=MODEL) as healthy,
        OpenAIServer(model=MODEL, fault=rate_fault(fail_rate=1.0)) as failing,
        cluster.api() as api,
    ):
        # Few requests in flight per endpoint, so the dead one's failures come in the five
        # separate waves that open its breaker well inside round 1's 100 agents per process
        # (32 at once could fail together as two waves and open it only in round 2).
        config = _llm(
            pid, failing.base_url, healthy.base_url, rounds=2, concurrency=4, max_retries=1
        )
        sid = start(api, config)["id"]
        done = finish(api, sid, timeout=120)
        assert done["status"] == "completed", done
        assert [r["n_valid"] for r in rounds_of(api, sid)] == [n, n]
        breaker = wait_for(
            lambda: (
                [e for e in _timeline(api, sid) if e["data"].get("cause") == "llm_breaker"] or None
            ),
            30,
            what="breaker entries on the timeline",
        )
        by_round = {e["round"]: e for e in breaker}
        assert set(by_round) <= {1, 2} and 1 in by_round, breaker
        first = by_round[1]
        assert first["data"]["base_url"] == failing.base_url and first["data"]["opened"] >= 1
        assert first["message"].startswith(
            f"round 1: LLM endpoint {failing.base_url} (model '{MODEL}'): circuit breaker opened"
        ), first["message"]
        assert "HTTP 500" in first["message"]
        if 2 in by_round:  # a process that still had its breaker open at round 2's start
            second = by_round[2]["data"]
            assert second["half_opened"] >= 1 and second["opened"] >= 1
        assert all(e["data"]["base_url"] == failing.base_url for e in breaker)
