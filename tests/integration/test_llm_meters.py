"""The workbench's numbers for a run, through the REST API and the event stream, with real
worker processes and a real OpenAI-compatible HTTP server of the tests' own: per-endpoint LLM
meters per round (live during the round, summed per run, costed from the config's prices), the
reproducibility record, a cancel with its reason, and a re-run that repeats the run."""

from __future__ import annotations

import pytest

from bench.openai_server import GARBAGE_TEXT, OpenAIServer, default_answer, stable_fraction
from tests.support import running_cluster, wait_for
from tests.support_simulations import (
    EventLog,
    deploy,
    export,
    finish,
    level_k,
    rounds_of,
    start,
)

MODEL = "meter-model"
PRICE = {"prompt_per_million": 0.5, "completion_per_million": 2.0}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("llm-meters")
    with running_cluster(tmp, f"sqlite+aiosqlite:///{tmp}/populace.db") as manager:
        yield manager


def _llm(pid: int, endpoints: list[dict], **overrides) -> dict:
    return {
        "population_id": pid,
        "rounds": 2,
        "rule": {"preset": "2/3"},
        "prompt": {"system": "roleplay", "user": "basic"},
        "policy": {"kind": "llm", "endpoints": endpoints},
        "deadlines": {"agent_s": 30},
        "seed": 11,
        **overrides,
    }


def test_meters_per_endpoint_per_round_live_and_per_run_with_cost_and_record(cluster):
    pid = deploy(cluster, size=120, name="metered")
    # Slow enough (and few enough requests at once) that the round streams progress before it
    # ends; two endpoints, one priced.
    with (
        OpenAIServer(model=MODEL, latency_s=0.05) as priced,
        OpenAIServer(model=MODEL, latency_s=0.05) as free,
        cluster.api() as api,
    ):
        endpoints = [
            {
                "base_url": priced.base_url + "/v1",
                "model": MODEL,
                "max_concurrency": 4,
                "price": PRICE,
            },
            {"base_url": free.base_url, "model": MODEL, "max_concurrency": 4},
        ]
        log = EventLog(cluster, "simulation:*")
        try:
            sid = start(api, _llm(pid, endpoints))["id"]
            done = finish(api, sid, timeout=180)
            assert done["status"] == "completed", done
            live = [e["payload"] for e in log.of("round.progress") if "endpoints" in e["payload"]]
        finally:
            log.close()
        rounds = rounds_of(api, sid)
        detail = api.get(f"/api/simulations/{sid}").json()

    assert live, "round.progress carried live meters during the rounds"
    assert all(
        m["requests"] >= 0 and "latency_counts" not in m for p in live for m in p["endpoints"]
    )
    assert max(sum(m["requests"] for m in p["endpoints"]) for p in live) > 0

    by_url = {priced.base_url: priced, free.base_url: free}
    for r in rounds:
        meters = {m["base_url"]: m for m in r["endpoints"]}
        assert set(meters) == set(by_url), "both endpoints metered, by their normalised URL"
        assert sum(m["requests"] for m in meters.values()) == r["llm_requests"]
        assert sum(m["prompt_tokens"] for m in meters.values()) == r["prompt_tokens"] > 0
        assert sum(m["completion_tokens"] for m in meters.values()) == r["completion_tokens"]
        for m in meters.values():
            assert m["requests"] > 0 and m["errors"] == 0 and m["late"] == 0, m
            # Every answered request was timed (the figures themselves belong in benchmarks).
            assert 0 < m["latency_p50_s"] <= m["latency_p95_s"], m
            assert m["requests_per_s"] == pytest.approx(m["requests"] / r["duration_s"])
        cost = meters[priced.base_url]["cost_usd"]
        expected = (
            meters[priced.base_url]["prompt_tokens"] * 0.5
            + meters[priced.base_url]["completion_tokens"] * 2.0
        ) / 1e6
        assert cost == pytest.approx(expected) and cost > 0
        assert meters[free.base_url]["cost_usd"] is None, "no price, no cost"
        assert r["finished_at"].endswith("Z")

    # The run's meters are the sum of its rounds'.
    run = {m["base_url"]: m for m in detail["meters"]}
    for url in by_url:
        per_round = [next(m for m in r["endpoints"] if m["base_url"] == url) for r in rounds]
        assert run[url]["requests"] == sum(m["requests"] for m in per_round)
        assert run[url]["prompt_tokens"] == sum(m["prompt_tokens"] for m in per_round)
    assert detail["cost_usd"] == pytest.approx(
        sum(
            next(m for m in r["endpoints"] if m["base_url"] == priced.base_url)["cost_usd"]
            for r in rounds
        )
    )
    # Requests seen by each server equal what its meter counted.
    assert run[priced.base_url]["requests"] == priced.requests
    assert run[free.base_url]["requests"] == free.requests

    record = detail["record"]
    assert record["populace_version"] == detail["version"]
    assert sum(p["agents"] for p in record["placement"]) == 120
    assert all(p["worker_id"] is not None and p["address"] for p in record["placement"])
    served = {e["base_url"]: e["served_models"] for e in record["endpoints"]}
    assert served == {priced.base_url: [MODEL], free.base_url: [MODEL]}


def test_cancel_keeps_its_reason_and_only_active_runs_cancel(cluster):
    pid = deploy(cluster, size=200, name="cancelled")
    with cluster.api() as api:
        sid = start(api, level_k(pid, rounds=500, seed=5))["id"]
        wait_for(
            lambda: api.get(f"/api/simulations/{sid}").json()["current_round"] >= 1,
            60,
            what="a round played",
        )
        too_long = api.post(f"/api/simulations/{sid}/cancel", json={"reason": "x" * 501})
        assert too_long.status_code == 422 and "reason" in too_long.text
        unknown = api.post(f"/api/simulations/{sid}/cancel", json={"why": "typo"})
        assert unknown.status_code == 422 and "why" in unknown.text
        assert api.get(f"/api/simulations/{sid}").json()["cancel_reason"] is None
        resp = api.post(f"/api/simulations/{sid}/cancel", json={"reason": "wrong rule"})
        assert resp.status_code == 200, resp.text
        done = finish(api, sid)
        assert done["status"] == "cancelled" and done["cancel_reason"] == "wrong rule", done
        again = api.post(f"/api/simulations/{sid}/cancel", json={"reason": "twice"})
        assert again.status_code == 409
        assert api.get(f"/api/simulations/{sid}").json()["cancel_reason"] == "wrong rule"


def test_rerun_repeats_the_run_and_records_which_it_repeats(cluster):
    pid = deploy(cluster, size=300, name="rerun")
    seed = 5561286856019017598  # beyond 2^53: must survive JSON as a decimal string
    with cluster.api() as api:
        first = start(api, level_k(pid, rounds=3, seed=seed))
        assert first["seed"] == str(seed)
        assert finish(api, first["id"])["status"] == "completed"
        resp = api.post(f"/api/simulations/{first['id']}/rerun")
        assert resp.status_code == 202, resp.text
        second = resp.json()
        assert second["id"] != first["id"] and second["seed"] == str(seed)
        assert finish(api, second["id"])["status"] == "completed"
        detail = api.get(f"/api/simulations/{second['id']}").json()
        assert detail["record"]["rerun_of"] == first["id"]
        assert detail["config"] == api.get(f"/api/simulations/{first['id']}").json()["config"]
        assert export(api, second["id"], "csv") == export(api, first["id"], "csv")

        # A re-run of a run whose population is busy is refused, and nothing is stored.
        busy = start(api, level_k(pid, rounds=500, seed=1))
        before = api.get("/api/simulations", params={"population_id": pid}).json()["items"]
        refused = api.post(f"/api/simulations/{first['id']}/rerun")
        assert refused.status_code == 409 and "busy" in refused.json()["detail"]
        after = api.get("/api/simulations", params={"population_id": pid}).json()["items"]
        assert len(after) == len(before)
        assert api.post(f"/api/simulations/{busy['id']}/cancel").status_code == 200
        assert api.post("/api/simulations/999999/rerun").status_code == 404


def _answer(request) -> str:
    """Garbage for some prompts, an out-of-range number for others, a valid number otherwise."""
    pick = stable_fraction(request.prompt)
    if pick < 0.2:
        return GARBAGE_TEXT
    if pick < 0.3:
        return "150"
    return default_answer(request)


def test_transcripts_rebuild_the_prompts_sent_and_say_why_answers_were_invalid(cluster):
    pid = deploy(cluster, size=40, name="transcribed")
    with OpenAIServer(model=MODEL, answer=_answer) as server, cluster.api() as api:
        config = _llm(
            pid,
            [{"base_url": server.base_url, "model": MODEL, "max_concurrency": 8}],
            store_responses=True,
        )
        config["policy"].update(api="completions", identical_prompts="each_asks")
        sid = start(api, config)["id"]
        assert finish(api, sid, timeout=120)["status"] == "completed"
        sent = {r.body["prompt"] for r in server.records if r.path.endswith("/completions")}
        page = api.get(f"/api/simulations/{sid}/transcripts", params={"limit": 200}).json()
        round_1 = api.get(
            f"/api/simulations/{sid}/transcripts", params={"round": 1, "limit": 200}
        ).json()
        invalid = api.get(
            f"/api/simulations/{sid}/transcripts", params={"round": 2, "status": "invalid"}
        ).json()
        doctors = api.get(
            f"/api/simulations/{sid}/transcripts",
            params={"round": 2, "attribute": "education:doctorate", "min": 10, "max": 90},
        ).json()
        first = api.get(f"/api/simulations/{sid}/transcripts", params={"round": 2, "limit": 15})
        second = api.get(
            f"/api/simulations/{sid}/transcripts",
            params={"round": 2, "limit": 15, "after": first.json()["next_after"]},
        ).json()
        agent = page["items"][0]["agent_id"]
        of_agent = api.get(f"/api/agents/{agent}/transcripts", params={"simulation_id": sid}).json()
        bad = api.get(f"/api/simulations/{sid}/transcripts", params={"attribute": "education"})
        bad_status = api.get(f"/api/simulations/{sid}/transcripts", params={"status": "weird"})
        not_in = api.get(
            f"/api/agents/{agent + (1 << 32)}/transcripts", params={"simulation_id": sid}
        )

    items = page["items"]
    assert len(items) == 40 and {i["round"] for i in items} == {2}, "the last round by default"
    # Every rebuilt prompt is one the server received, for both rounds.
    assert {i["prompt"] for i in items + round_1["items"]} <= sent
    assert all("Round 1:" in i["prompt"] for i in items), "round 2 is told round 1's outcome"
    chose = [i for i in round_1["items"] if i["status"] == "valid"]
    assert chose and all(
        f"you chose {next(x['value'] for x in round_1['items'] if x['agent_id'] == i['agent_id']):g}"
        in i["prompt"]
        for i in items
        if i["agent_id"] in {c["agent_id"] for c in chose}
    )
    assert all(i["response"] is not None for i in items), "store_responses keeps raw answers"

    assert invalid["items"] and all(i["status"] == "invalid" for i in invalid["items"])
    reasons = {i["response"]: i["reason"] for i in invalid["items"]}
    assert all(
        ("no number could be read" in reason if response == GARBAGE_TEXT else "outside" in reason)
        for response, reason in reasons.items()
    ), reasons
    assert all(i["reason"] is None for i in items if i["status"] == "valid")

    assert all(
        i["attributes"]["education"] == "doctorate" and 10 <= i["value"] <= 90
        for i in doctors["items"]
    )
    assert first.status_code == 200 and len(first.json()["items"]) == 15
    assert [i["agent_id"] for i in first.json()["items"] + second["items"]] == [
        i["agent_id"] for i in items[:30]
    ]
    assert [(i["round"], i["agent_id"]) for i in of_agent["items"]] == [(1, agent), (2, agent)]
    assert of_agent["items"][1]["prompt"] == items[0]["prompt"]
    assert bad.status_code == 422 and "attribute" in bad.text
    assert bad_status.status_code == 422 and "status" in bad_status.text
    assert not_in.status_code == 404


def test_the_estimate_before_launch_scales_with_agents_rounds_and_prices(cluster):
    pid = deploy(cluster, size=50, name="estimated")
    endpoints = [
        {"base_url": "http://127.0.0.1:9/v1", "model": MODEL, "max_concurrency": 3, "price": PRICE},
        {"base_url": "http://127.0.0.1:10/v1", "model": MODEL, "max_concurrency": 1},
    ]
    with cluster.api() as api:
        before = api.get("/api/simulations", params={"population_id": pid}).json()["items"]
        one = api.post("/api/simulations/estimate", json=_llm(pid, endpoints, rounds=2)).json()
        two = api.post("/api/simulations/estimate", json=_llm(pid, endpoints, rounds=4)).json()
        synthetic = api.post(
            "/api/simulations/estimate",
            json={"population_id": pid, "rounds": 3, "policy": {"kind": "synthetic"}},
        ).json()
        missing = api.post("/api/simulations/estimate", json=_llm(999_999, endpoints))
        invalid = api.post("/api/simulations/estimate", json=_llm(pid, endpoints, rounds=0))
        after = api.get("/api/simulations", params={"population_id": pid}).json()["items"]
    assert one["requests"] == 50 * 2 and two["requests"] == 50 * 4
    assert one["llm_mode"] == "per_agent", "chat answers are asked agent by agent"
    assert one["prompt_tokens_per_request"] > 20
    assert one["prompt_tokens_per_request"] == round(one["prompt_tokens"] / one["requests"])
    # Later rounds' prompts carry a longer history.
    assert two["prompt_tokens"] / two["requests"] > one["prompt_tokens"] / one["requests"]
    assert one["completion_tokens"] == one["requests"] * 16, "max_tokens of a basic answer"
    priced = one["endpoints"][0]
    assert priced["share"] == pytest.approx(0.75) and one["endpoints"][1]["cost_usd"] is None
    assert one["cost_usd"] == pytest.approx(
        (0.75 * one["prompt_tokens"] * 0.5 + 0.75 * one["completion_tokens"] * 2.0) / 1e6, rel=1e-3
    )
    assert synthetic["requests"] == 0 and synthetic["cost_usd"] is None
    assert missing.status_code == 404 and "999999" in missing.json()["detail"]
    assert invalid.status_code == 422 and "rounds" in invalid.text
    assert len(after) == len(before), "an estimate stores nothing"
