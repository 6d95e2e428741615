"""A whole simulation with a real LLM: Gemma 3 270M on CPU through llama.cpp's server
(`populace llm serve-local`), 20 agents with personas, 2 rounds, the basic prompt."""

from __future__ import annotations

import csv
import io
import json

import pytest

from backend.llm_local import MODEL_ALIAS, start_local_llm
from tests.support import free_port, wait_for
from tests.support_simulations import deploy, export, finish, rounds_of, start

pytestmark = pytest.mark.timeout(900)
AGENTS = 20


@pytest.fixture(scope="module")
def gemma(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("llm-data")
    with start_local_llm(free_port(), data_dir=data_dir) as llm:
        yield llm


def test_gemma_plays_two_rounds_and_everything_is_kept(manager_factory, gemma, tmp_path):
    manager = manager_factory().start()
    manager.start_workers(procs=2)
    wait_for(
        lambda: len([w for w in manager.workers() if w["state"] == "online"]) == 2,
        30,
        what="two workers online",
    )
    pid = deploy(manager, size=AGENTS)
    config = {
        "population_id": pid,
        "name": "gemma",
        "rounds": 2,
        "rule": {"preset": "2/3"},
        "prompt": {"system": "roleplay", "user": "basic"},
        "policy": {
            "kind": "llm",
            # A base model: plain completions, the answer held to a number by a grammar.
            "endpoints": [
                {
                    "base_url": gemma.base_url,
                    "model": MODEL_ALIAS,
                    "server": "llama_cpp",
                    "max_concurrency": 2,
                }
            ],
            "api": "completions",
            "temperature": 0.7,
        },
        "deadlines": {"agent_s": 120},
        "segment_by": ["education"],
        "store_responses": True,
        "seed": 42,
    }
    with manager.api() as api:
        sid = start(api, config)["id"]
        done = finish(api, sid, timeout=600)
        assert done["status"] == "completed", done
        detail = api.get(f"/api/simulations/{sid}").json()
        assert detail["models"] == [MODEL_ALIAS]
        assert detail["prompt_tokens"] > 0 and detail["completion_tokens"] > 0
        rounds = rounds_of(api, sid)
        assert [r["round"] for r in rounds] == [1, 2]
        # A 270M base model often names numbers past the range even within the grammar's
        # digits: those count invalid. Whatever it says, every agent is accounted for.
        for r in rounds:
            assert r["n_valid"] + r["n_invalid"] + r["n_late"] == AGENTS, r
            assert sum(r["histogram"]) == r["n_valid"]
            assert sum(s["count"] for s in r["segments"]["education"].values()) == r["n_valid"]
            if r["n_valid"]:
                assert 0 <= r["min"] <= r["median"] <= r["max"] <= 100
                assert r["target"] == pytest.approx(2 / 3 * r["mean"])
        assert sum(r["n_valid"] for r in rounds) > 0, rounds
        decisions = list(csv.DictReader(io.StringIO(export(api, sid, "csv").decode())))
        jsonl = export(api, sid, "jsonl").decode().splitlines()
    assert len(decisions) == len(jsonl) == 2 * AGENTS
    for d in decisions:
        if d["status"] == "valid":
            assert 0 <= float(d["value"]) <= 100
            assert float(d["response"]) == float(d["value"]), d
        else:
            assert d["value"] == "", d
    print(
        json.dumps(
            {
                "gemma_simulation": {
                    "rounds": [
                        {k: r[k] for k in ("round", "n_valid", "n_invalid", "mean", "duration_s")}
                        for r in rounds
                    ]
                }
            }
        )
    )


def test_gemma_chooses_go_or_stay_in_el_farol(manager_factory, gemma):
    # A plugin's prompt, rendered by the plugin, answered by a real model held to the action's
    # options by llama.cpp's grammar.
    manager = manager_factory().start()
    manager.start_workers(procs=1)
    wait_for(lambda: any(w["state"] == "online" for w in manager.workers()), 30, what="a worker")
    pid = deploy(manager, size=10)
    endpoint = {"base_url": gemma.base_url, "model": MODEL_ALIAS, "server": "llama_cpp"}
    config = {
        "population_id": pid,
        "rounds": 1,
        "plugin": {"name": "el_farol", "params": {"group_size": 5}},
        "policy": {
            "kind": "llm",
            "endpoints": [{**endpoint, "max_concurrency": 2}],
            "api": "completions",
            "temperature": 0.7,
        },
        "deadlines": {"agent_s": 120},
        "store_responses": True,
        "seed": 42,
    }
    with manager.api() as api:
        sid = start(api, config)["id"]
        done = finish(api, sid, timeout=600)
        assert done["status"] == "completed", done
        (played,) = rounds_of(api, sid)
        lines = export(api, sid, "jsonl").decode().splitlines()
    assert played["n_valid"] == 10, played
    decisions = [json.loads(line) for line in lines]
    assert {d["value"] for d in decisions} <= {"go", "stay"}
    assert all(d["response"].strip() == d["value"] for d in decisions)
