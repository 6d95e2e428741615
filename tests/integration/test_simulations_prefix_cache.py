"""Prompt tokens taken from the LLM servers' prefix cache, per round and per run, through real
worker processes, the manager and its API and events, against the tests' own OpenAI-compatible
server (bench/openai_server.py): in vLLM mode it reports usage.prompt_tokens_details.cached_tokens
from a prefix cache of 16-token blocks, as vLLM with --enable-prompt-tokens-details does;
otherwise it reports none, like a server that does not say."""

from __future__ import annotations

import pytest

from bench.openai_server import OpenAIServer
from tests.support import Manager, running_cluster, wait_for
from tests.support_simulations import EventLog, deploy, finish, rounds_of, start

MODEL = "test-model"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("simulations-prefix-cache")
    with running_cluster(tmp, f"sqlite+aiosqlite:///{tmp}/populace.db") as manager:
        yield manager


def _config(pid: int, base_url: str, server: str) -> dict:
    return {
        "population_id": pid,
        "rounds": 2,
        "rule": {"preset": "2/3"},
        # Every agent's prompt starts with the same system prompt (the rules): a shared prefix.
        "prompt": {"system": "plain", "user": "basic"},
        "policy": {
            "kind": "llm",
            "endpoints": [
                {"base_url": base_url, "model": MODEL, "server": server, "max_concurrency": 16}
            ],
        },
        "deadlines": {"agent_s": 10},
        "seed": 5,
    }


def _run(cluster: Manager, config: dict) -> tuple[dict, list[dict], list[dict]]:
    """The finished run, its rounds and its round.completed events."""
    with cluster.api() as api:
        # The simulation ids are sequential: subscribe to the next one before creating it.
        upcoming = api.get("/api/simulations", params={"limit": 1000}).json()["items"]
        following = max((s["id"] for s in upcoming), default=0) + 1
        events = EventLog(cluster, f"simulation:{following}")
        try:
            sid = start(api, config)["id"]
            assert sid == following
            done = finish(api, sid, timeout=120)
            assert done["status"] == "completed", done
            wait_for(lambda: len(events.of("round.completed")) == 2, 10, what="round events")
        finally:
            events.close()
        return done, rounds_of(api, sid), [e["payload"] for e in events.of("round.completed")]


def test_a_shared_prompt_prefix_is_reported_cached_per_round_and_per_run(cluster):
    pid = deploy(cluster, size=60)
    with OpenAIServer(model=MODEL, validate="vllm") as server:
        done, rounds, completed = _run(cluster, _config(pid, server.base_url, "vllm"))
    assert [r["round"] for r in rounds] == [1, 2]
    for r in rounds:
        assert r["n_valid"] == 60, r
        assert 0 <= r["cached_prompt_tokens"] <= r["prompt_tokens"], r
    # Round 2's prompts share the system prompt (and more) with round 1's: cached.
    assert rounds[1]["cached_prompt_tokens"] > 0, rounds[1]
    assert done["cached_prompt_tokens"] == sum(r["cached_prompt_tokens"] for r in rounds) > 0
    assert done["prompt_tokens"] == sum(r["prompt_tokens"] for r in rounds)
    assert [e["cached_prompt_tokens"] for e in completed] == [
        r["cached_prompt_tokens"] for r in rounds
    ], "round.completed carries it live"


def test_a_server_that_reports_no_cache_shows_zero(cluster):
    pid = deploy(cluster, size=30, name="uncached")
    with OpenAIServer(model=MODEL) as server:
        done, rounds, completed = _run(cluster, _config(pid, server.base_url, "openai"))
    assert all(r["prompt_tokens"] > 0 and r["cached_prompt_tokens"] == 0 for r in rounds), rounds
    assert done["prompt_tokens"] > 0 and done["cached_prompt_tokens"] == 0
    assert [e["cached_prompt_tokens"] for e in completed] == [0, 0]
