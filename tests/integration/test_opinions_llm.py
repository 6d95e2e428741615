"""The LLM variant of `bounded_confidence` (issue 28): each agent reads its own last position
and its neighbours' and states a new one. On a real manager and two worker processes, with a
ring lattice of 12 agents split between them (each agent's 4 neighbours, some hosted by the
other process):

- Gemma 3 270M on llama.cpp plays three rounds; every opinion is in [0, 1] and every prompt
  (its transcript) shows what the agent and its neighbours held after the round before, and in
  round 1 the opinion the rule-based policy starts from (AgentView.draw);
- with an OpenAI-compatible recorder as the endpoint, the prompts the workers sent are exactly
  the transcripts' (the manager renders them again the way the workers did).
"""

from __future__ import annotations

import json
import re

import pytest

from backend.llm_local import MODEL_ALIAS, start_local_llm
from bench.openai_server import OpenAIServer
from tests.support import free_port, running_cluster, wait_for
from tests.support_simulations import export, finish, start

pytestmark = pytest.mark.timeout(900)
AGENTS = 12
ROUNDS = 3
POPULATION = {
    "name": "ring",
    "size": AGENTS,
    "seed": 3,
    "distributions": [
        {
            "name": "group",
            "categories": [{"name": "a", "weight": 0.5}, {"name": "b", "weight": 0.5}],
        }
    ],
    "graph": {"kind": "watts_strogatz", "k": 4, "p": 0},
    "placement": {"spread": "even"},
}
PARAMS = {"model": "hegselmann_krause", "epsilon": 0.3, "topic": "a four-day working week"}


@pytest.fixture(scope="module")
def ring(tmp_path_factory):
    """(manager, population id) with two worker processes of the same node."""
    tmp = tmp_path_factory.mktemp("opinions")
    with running_cluster(tmp, f"sqlite+aiosqlite:///{tmp}/populace.db") as manager:
        with manager.api() as api:
            resp = api.post("/api/populations", json=POPULATION)
            assert resp.status_code == 202, resp.text
            pid = resp.json()["id"]
            wait_for(
                lambda: api.get(f"/api/populations/{pid}").json()["status"] == "deployed",
                60,
                what="the ring deployed",
            )
        yield manager, pid


def _launch(api, pid: int, endpoint: dict, **policy) -> int:
    config = {
        "population_id": pid,
        "rounds": ROUNDS,
        "seed": 11,
        "plugin": {"name": "bounded_confidence", "params": PARAMS},
        "policy": {
            "kind": "llm",
            "endpoints": [{**endpoint, "max_concurrency": 2}],
            "api": "completions",
            "temperature": 0.7,
            **policy,
        },
        "deadlines": {"agent_s": 120},
        "store_responses": True,
    }
    sid = start(api, config)["id"]
    done = finish(api, sid, timeout=600)
    assert done["status"] == "completed", done
    return sid


def _values(api, sid: int) -> dict[tuple[int, int], float | None]:
    """(round, agent id) -> the agent's opinion (None: no valid one)."""
    lines = export(api, sid, "jsonl").decode().splitlines()
    return {(d["round"], d["agent_id"]): d["value"] for d in map(json.loads, lines)}


def _prompts(api, sid: int) -> dict[tuple[int, int], str]:
    """(round, agent id) -> the user prompt its transcript shows."""
    out = {}
    for number in range(1, ROUNDS + 1):
        resp = api.get(f"/api/simulations/{sid}/transcripts", params={"round": number})
        assert resp.status_code == 200, resp.text
        page = resp.json()
        assert len(page["items"]) == AGENTS
        out |= {(number, item["agent_id"]): item["user"] for item in page["items"]}
    return out


def _neighbours(api, agent_id: int) -> list[int]:
    resp = api.get(f"/api/agents/{agent_id}/neighbors", params={"limit": 50})
    assert resp.status_code == 200, resp.text
    return [n["id"] for n in resp.json()["items"]]


def _stated(prompt: str) -> tuple[str, list[str]]:
    """(own position, neighbours' positions) as a prompt states them."""
    own = re.search(r"Your position so far: ([0-9.]+)\.", prompt)
    heard = re.search(r"Your neighbours' positions: ([0-9., ]+)\.", prompt)
    assert own is not None, prompt
    return own.group(1), (heard.group(1).split(", ") if heard else [])


def test_gemma_states_positions_from_its_own_and_its_neighbours(ring):
    manager, pid = ring
    with start_local_llm(free_port(), data_dir=manager.tmp / "llm") as gemma:
        endpoint = {"base_url": gemma.base_url, "model": MODEL_ALIAS, "server": "llama_cpp"}
        with manager.api() as api:
            sid = _launch(api, pid, endpoint)
            values = _values(api, sid)
            prompts = _prompts(api, sid)
            ids = sorted({agent for _, agent in values})
            neighbours = {agent: _neighbours(api, agent) for agent in ids}
            # The rule-based policy's first round: the opinions an LLM agent starts from.
            rule = dict(PARAMS)
            start_config = {
                "population_id": pid,
                "rounds": 1,
                "seed": 11,
                "plugin": {"name": "bounded_confidence", "params": rule},
            }
            rule_sid = start(api, start_config)["id"]
            assert finish(api, rule_sid)["status"] == "completed"
            drawn = _values(api, rule_sid)
    assert len(ids) == AGENTS and all(len(n) == 4 for n in neighbours.values())
    valid = [v for v in values.values() if v is not None]
    assert len(valid) >= AGENTS * ROUNDS // 2, values  # a 270M model mostly answers in range
    assert all(0.0 <= v <= 1.0 for v in valid)
    for agent in ids:
        own, heard = _stated(prompts[(1, agent)])
        assert own == f"{drawn[(1, agent)]:.2f}" and heard == []
        for number in range(2, ROUNDS + 1):
            own, heard = _stated(prompts[(number, agent)])
            before = values[(number - 1, agent)]
            # Without a valid opinion last round, the agent still has its first one.
            expected_own = before if before is not None else drawn[(1, agent)]
            assert own == f"{expected_own:.2f}", (number, agent, prompts[(number, agent)])
            expected = [
                f"{values[(number - 1, n)]:.2f}"
                for n in neighbours[agent]
                if values[(number - 1, n)] is not None
            ]
            assert heard == expected, (number, agent, prompts[(number, agent)])


def test_the_prompts_sent_are_the_transcripts(ring):
    manager, pid = ring
    with OpenAIServer(validate="vllm", model="m") as recorder:
        endpoint = {"base_url": recorder.base_url, "model": "m", "server": "vllm"}
        with manager.api() as api:
            # Every agent asks (no shared answer between equal prompts): one request each.
            sid = _launch(api, pid, endpoint, identical_prompts="each_asks")
            prompts = _prompts(api, sid)
            values = _values(api, sid)
        sent = [body["prompt"] for body in recorder.bodies]
    assert all(v is not None and 0.0 <= v <= 1.0 for v in values.values()), values
    flat = [p for item in sent for p in (item if isinstance(item, list) else [item])]
    assert len(flat) == AGENTS * ROUNDS
    # Each transcript's user prompt ends a completions prompt the workers sent, and each prompt
    # sent is some transcript's.
    users = {user.rstrip() for user in prompts.values()}
    assert all(any(p.rstrip().endswith(u) for u in users) for p in flat)
    for key, user in prompts.items():
        assert any(p.rstrip().endswith(user.rstrip()) for p in flat), (key, user)
