"""LLM simulations through the REST API, against a real OpenAI-compatible HTTP server of the
tests' own (bench/openai_server.py) and real worker processes: the failure paths the issue
names, and that prompts, history, raw answers and tokens make it through."""

from __future__ import annotations

import json

import pytest

from bench.openai_server import GARBAGE_TEXT, OpenAIServer, rate_fault
from tests.support import free_port, running_cluster, wait_for
from tests.support_simulations import deploy, export, finish, rounds_of, start

MODEL = "test-model"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("simulations-llm")
    with running_cluster(tmp, f"sqlite+aiosqlite:///{tmp}/populace.db") as manager:
        yield manager


def _llm(pid: int, base_url: str, **overrides) -> dict:
    policy = {
        "kind": "llm",
        "endpoints": [{"base_url": base_url, "model": MODEL, "max_concurrency": 64}],
        **overrides.pop("policy", {}),
    }
    return {
        "population_id": pid,
        "rounds": 2,
        "rule": {"preset": "2/3"},
        "prompt": {"system": "roleplay", "user": "basic"},
        "policy": policy,
        "deadlines": {"agent_s": 5},
        "seed": 3,
        **overrides,
    }


def test_an_unreachable_endpoint_fails_the_simulation_before_round_1(cluster):
    pid = deploy(cluster, size=50)
    dead = f"http://127.0.0.1:{free_port()}"
    with cluster.api() as api:
        sid = start(api, _llm(pid, dead))["id"]
        done = finish(api, sid, timeout=60)
        assert done["status"] == "failed" and done["current_round"] == 0, done
        assert dead in done["error"] and "not usable from worker" in done["error"], done["error"]
        assert rounds_of(api, sid) == []


def test_an_endpoint_failing_every_request_pauses_the_run_until_it_is_fixed(cluster):
    pid = deploy(cluster, size=50)
    with OpenAIServer(model=MODEL, fault=rate_fault(fail_rate=1.0)) as server, cluster.api() as api:
        config = _llm(pid, server.base_url, rounds=2)
        config["policy"]["max_retries"] = 1
        sid = start(api, config)["id"]
        paused = wait_for(
            lambda: (s := api.get(f"/api/simulations/{sid}").json())["status"] == "paused" and s,
            60,
            what="the run paused",
        )
        # Not a round of empty answers: nothing is kept, and the reason names the endpoint.
        assert rounds_of(api, sid) == [] and paused["current_round"] == 0
        assert server.base_url in paused["pause_reason"], paused
        assert "failed" in paused["pause_reason"] and "round 1" in paused["pause_reason"]
        asked = server.requests
        assert 0 < asked <= 100, "the circuit breaker stops hammering the dead endpoint"

        server.behaviour.fault = None  # the endpoint is fixed
        assert api.post(f"/api/simulations/{sid}/resume").status_code == 200
        done = finish(api, sid, timeout=120)
        assert done["status"] == "completed", done
        assert [r["n_valid"] for r in rounds_of(api, sid)] == [50, 50]


def test_llm_rounds_with_unparseable_answers_counted_invalid(cluster):
    pid = deploy(cluster, size=200)
    with (
        OpenAIServer(model=MODEL, fault=rate_fault(garbage_rate=0.25)) as server,
        cluster.api() as api,
    ):
        sid = start(api, _llm(pid, server.base_url, store_responses=True))["id"]
        done = finish(api, sid, timeout=120)
        assert done["status"] == "completed", done
        detail = api.get(f"/api/simulations/{sid}").json()
        assert detail["models"] == [MODEL]
        assert detail["prompt_tokens"] > 0 and detail["completion_tokens"] > 0
        rounds = rounds_of(api, sid)
        assert len(rounds) == 2
        for r in rounds:
            assert r["n_valid"] + r["n_invalid"] + r["n_late"] == 200
            assert 0 < r["n_invalid"] < 200 and r["n_late"] == 0, r
            assert 0 <= r["min"] <= r["max"] <= 100
            assert r["prompt_tokens"] > 0
        decisions = [json.loads(x) for x in export(api, sid, "jsonl").decode().splitlines()]
        assert len(decisions) == 400
        invalid = [d for d in decisions if d["status"] == "invalid"]
        assert len(invalid) == sum(r["n_invalid"] for r in rounds)
        assert all(d["value"] is None and d["response"] == GARBAGE_TEXT for d in invalid)
        valid = [d for d in decisions if d["status"] == "valid"]
        assert all(float(d["response"]) == d["value"] for d in valid), valid[:3]

        prompts = [json.dumps(body) for body in server.bodies]
        assert any("whose highest education is" in p for p in prompts), "personas role-played"
        assert all("2/3 of the average" in p for p in prompts)
        winner = f"the winning number was {rounds[0]['winner_value']:.2f}".rstrip("0").rstrip(".")
        second = [p for p in prompts if "This is round 2" in p]
        assert second and all(winner in p for p in second), "round 2 knows round 1's winner"
        assert not any(winner in p for p in prompts if "This is round 1" in p)


def test_a_run_below_its_participation_floor_is_marked_not_whole(cluster):
    pid = deploy(cluster, size=100)
    with (
        OpenAIServer(model=MODEL, fault=rate_fault(garbage_rate=0.5)) as server,
        cluster.api() as api,
    ):
        refused = api.post(
            "/api/simulations", json=_llm(pid, server.base_url, participation_floor=1.5)
        )
        assert refused.status_code == 422 and "participation_floor" in refused.text
        marked = finish(api, start(api, _llm(pid, server.base_url))["id"], timeout=120)
        # The same answers against a floor they clear: whole.
        cleared = _llm(pid, server.base_url, participation_floor=0.3)
        whole = finish(api, start(api, cleared)["id"], timeout=120)
        for run, below in ((marked, 2), (whole, 0)):
            sid = run["id"]
            assert run["status"] == "completed", run
            rounds = rounds_of(api, sid)
            for r in rounds:
                assert r["participation"] == r["n_valid"] / 100, r
                answered = r["n_valid"] + r["n_invalid"]
                assert r["parse_failure_rate"] == r["n_invalid"] / answered, r
                assert 0 < r["n_invalid"] < 100
            floor = 0.8 if below else 0.3
            assert sum(r["participation"] < floor for r in rounds) == below
            assert run["rounds_below_floor"] == below and run["participation_floor"] == floor
            record = api.get(f"/api/simulations/{sid}/record").json()
            assert record["simulation"]["validity"] == {
                "participation_floor": floor,
                "rounds_below_floor": below,
                "whole": below == 0,
            }
        listed = {s["id"]: s for s in api.get("/api/simulations").json()["items"]}
        assert listed[marked["id"]]["rounds_below_floor"] == 2
        assert listed[whole["id"]]["rounds_below_floor"] == 0


def test_a_hung_request_is_cut_at_the_agent_deadline_and_the_round_closes(cluster):
    pid = deploy(cluster, size=100)
    with (
        OpenAIServer(model=MODEL, fault=rate_fault(hang_rate=0.1), hang_s=600) as server,
        cluster.api() as api,
    ):
        config = _llm(pid, server.base_url, rounds=1, deadlines={"agent_s": 1.5})
        config["policy"]["max_retries"] = 0
        sid = start(api, config)["id"]
        done = finish(api, sid, timeout=60)
        assert done["status"] == "completed", done
        (r,) = rounds_of(api, sid)
        assert r["n_late"] > 0 and r["n_valid"] > 0, r
        assert r["n_valid"] + r["n_invalid"] + r["n_late"] == 100
        late = [
            json.loads(x)
            for x in export(api, sid, "jsonl").decode().splitlines()
            if json.loads(x)["status"] == "late"
        ]
        assert len(late) == r["n_late"] and all(d["value"] is None for d in late)


def test_endpoint_concurrency_is_a_total_over_the_worker_processes(cluster):
    """max_concurrency caps what the endpoint sees from the whole cluster: two worker processes
    with 3 in flight in total never put a fourth request on the server, and use all 3."""
    pid = deploy(cluster, size=60)
    with OpenAIServer(model=MODEL, latency_s=0.2) as server, cluster.api() as api:
        config = _llm(pid, server.base_url, rounds=1)
        config["policy"]["endpoints"][0]["max_concurrency"] = 3
        sid = start(api, config)["id"]
        assert finish(api, sid, timeout=120)["status"] == "completed"
        assert server.requests >= 60
        assert server.max_in_flight == 3
        # The round records the requests it sent (every agent's prompt differs here).
        (played,) = rounds_of(api, sid)
        assert played["llm_requests"] == server.requests


def test_plugins_are_played_by_llm_agents_in_their_action_types(cluster):
    # A real vLLM-speaking server of the tests' own: it honours (and checks) structured outputs.
    pid = deploy(cluster, size=40)
    with OpenAIServer(model=MODEL, validate="vllm") as server, cluster.api() as api:
        endpoint = {"base_url": server.base_url, "model": MODEL, "server": "vllm"}
        played = {}
        for plugin in ("el_farol", "public_goods"):
            body = {
                "population_id": pid,
                "rounds": 2,
                "plugin": {"name": plugin, "params": {"group_size": 5}},
                "policy": {"kind": "llm", "endpoints": [endpoint], "temperature": 0.7},
                "store_responses": True,
                "seed": 3,
            }
            estimated = api.post("/api/simulations/estimate", json=body)
            assert estimated.status_code == 200, estimated.text
            sid = start(api, body)["id"]
            done = finish(api, sid, timeout=120)
            assert done["status"] == "completed", done
            # The estimate counts the most the run can ask: every agent, every round.
            asked = sum(r["llm_requests"] for r in rounds_of(api, sid))
            assert 0 < asked <= estimated.json()["requests"] == 80
            assert estimated.json()["prompt_tokens"] > 0
            lines = export(api, sid, "jsonl").decode().splitlines()
            played[plugin] = (rounds_of(api, sid), [json.loads(line) for line in lines])
        transcripts = api.get(f"/api/simulations/{sid}/transcripts", params={"round": 2}).json()
        agent = transcripts["items"][0]["agent_id"]
        interview = api.post(
            f"/api/agents/{agent}/interviews", json={"simulation_id": sid, "question": "Why?"}
        )
        assert interview.status_code == 409 and "plays plugin 'public_goods'" in interview.text
        bodies = server.bodies
    # Every agent answered in the action's type: an option's name, a whole number in range.
    farol_rounds, farol = played["el_farol"]
    assert [r["n_valid"] for r in farol_rounds] == [40, 40]
    assert {d["value"] for d in farol} <= {"go", "stay"} and len(farol) == 80
    assert all(r["metrics"]["go_ratio"] is not None for r in farol_rounds)
    goods_rounds, goods = played["public_goods"]
    assert [r["n_valid"] for r in goods_rounds] == [40, 40]
    assert all(isinstance(d["value"], int) and 0 <= d["value"] <= 20 for d in goods)
    # The plugin rendered each prompt, its group's last round included, and the request asked
    # for its action's type.
    prompts = [json.dumps(b) for b in bodies]
    assert any("public goods game" in p and "This is round 2" in p for p in prompts)
    assert any("Last round your group gave" in p for p in prompts)
    assert any("Last week" in p and "of the town went to the bar" in p for p in prompts)
    constraints = [b.get("structured_outputs") for b in bodies]
    assert {"choice": ["go", "stay"]} in constraints
    assert any(c and "regex" in c for c in constraints)
    # Transcripts rebuild the prompts the agents were sent, their group's last round included.
    sent = {m["content"] for b in bodies for m in b.get("messages", []) if m["role"] == "user"}
    items = transcripts["items"]
    assert len(items) == 40 and all(t["user"] in sent for t in items)
    assert all("Last round your group gave" in t["user"] for t in items)
