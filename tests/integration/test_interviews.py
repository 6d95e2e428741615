"""Interviewing agents end to end: a real manager (SQLite and Postgres), real worker processes
over real gRPC, and the tests' own OpenAI-compatible server (checking requests as vLLM does)
streaming the answers."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess

import httpx
import pytest

from bench.openai_server import OpenAIServer, default_answer
from tests.support import populace_cmd, reset_postgres, running_cluster, wait_for, worker_client
from tests.support_simulations import deploy, finish, level_k, start

MODEL = "test-model"
ANSWER = "I went for a low number because everyone else would too."
# Past the answer: the fake server must cut it at the interview's stop string.
SPOKEN = ANSWER + "\nInterviewer: and next?"


def _answer(request) -> str:
    return SPOKEN if "\nYou:" in request.prompt else default_answer(request)


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def cluster(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"interviews-{request.param}")
    if request.param == "sqlite":
        url = f"sqlite+aiosqlite:///{tmp}/populace.db"
    else:
        url = request.getfixturevalue("postgres_server_url")
        reset_postgres(url)
    with running_cluster(tmp, url) as manager:
        yield manager


@pytest.fixture(scope="module")
def llm():
    with OpenAIServer(model=MODEL, answer=_answer, validate="vllm") as server:
        yield server


@pytest.fixture(scope="module")
def run(cluster, llm):
    """A finished two-round LLM run: (population id, simulation id)."""
    pid = deploy(cluster, size=20, name="interviewed")
    config = {
        "population_id": pid,
        "name": "to interview",
        "rounds": 2,
        "rule": {"preset": "2/3"},
        "prompt": {"system": "roleplay", "user": "basic"},
        "policy": {
            "kind": "llm",
            "endpoints": [
                {"base_url": llm.base_url, "model": MODEL, "server": "vllm", "max_concurrency": 8}
            ],
            "api": "completions",
        },
        "deadlines": {"agent_s": 10},
        "seed": 5,
    }
    with cluster.api() as api:
        sid = start(api, config)["id"]
        assert finish(api, sid)["status"] == "completed"
    return pid, sid


@pytest.fixture(autouse=True)
def plain_llm(llm):
    llm.behaviour.fault = None
    llm.behaviour.stream_interval_s = 0.0
    yield


def _agents(api, pid: int) -> list[dict]:
    resp = api.get("/api/agents", params={"population_id": pid, "limit": 20})
    assert resp.status_code == 200, resp.text
    return resp.json()["items"]


def _ask(cluster, agent_id: int, body: dict, token: str | None = None) -> tuple[int, list]:
    """The status and the NDJSON events of one interview (the error body when refused)."""
    headers = {"Authorization": f"Bearer {token or cluster.api_token}"}
    url = f"{cluster.url}/api/agents/{agent_id}/interviews"
    with httpx.stream("POST", url, json=body, headers=headers, timeout=60) as resp:
        if resp.status_code != 200:
            resp.read()
            return resp.status_code, [resp.json()]
        assert resp.headers["content-type"].startswith("application/x-ndjson")
        return 200, [json.loads(line) for line in resp.iter_lines() if line.strip()]


def test_an_answer_streams_in_pieces_and_is_kept_with_the_run(cluster, llm, run):
    pid, sid = run
    with cluster.api() as api:
        agent = _agents(api, pid)[3]
        decisions = api.get(f"/api/agents/{agent['id']}/decisions").json()["items"]
        llm.reset()
        status, events = _ask(
            cluster, agent["id"], {"simulation_id": sid, "question": "Why did you pick it?"}
        )
        assert status == 200, events
        deltas = [e["text"] for e in events if e["type"] == "delta"]
        assert len(deltas) > 1, events
        assert "".join(deltas) == ANSWER
        assert [e["type"] for e in events][-1] == "done"
        done = events[-1]["interview"]
        assert done["status"] == "answered" and done["answer"] == ANSWER, done
        assert done["model"] == MODEL and done["error"] is None
        assert done["prompt_tokens"] > 0 and done["completion_tokens"] == len(ANSWER.split())
        # The exact prompt went to the LLM: the persona, the agent's own past, the question.
        (sent,) = [r.body for r in llm.records if r.body.get("stream")]
        assert sent["prompt"] == done["prompt"]
        assert agent["persona"] in done["prompt"]
        assert done["prompt"].endswith("Interviewer: Why did you pick it?\nYou:")
        for decision in decisions:
            line = f"Round {decision['round']}: "
            if decision["status"] == "valid":
                line += f"I chose {decision['value']:g}"
            assert line in done["prompt"], (line, done["prompt"])

        mine = api.get(f"/api/agents/{agent['id']}/interviews", params={"simulation_id": sid})
        assert mine.status_code == 200
        assert [i["id"] for i in mine.json()["items"]] == [done["id"]]
        assert mine.json()["items"][0]["answer"] == ANSWER
        everyone = api.get(f"/api/simulations/{sid}/interviews").json()
        assert done["id"] in [i["id"] for i in everyone["items"]]


def test_pages_are_newest_first_with_a_cursor(cluster, run):
    pid, sid = run
    with cluster.api() as api:
        agent = _agents(api, pid)[5]
    ids = []
    for question in ("First?", "Second?", "Third?"):
        status, events = _ask(cluster, agent["id"], {"simulation_id": sid, "question": question})
        assert status == 200 and events[-1]["type"] == "done"
        ids.append(events[-1]["interview"]["id"])
    with cluster.api() as api:
        url = f"/api/agents/{agent['id']}/interviews"
        first = api.get(url, params={"limit": 2}).json()
        assert [i["id"] for i in first["items"]] == ids[:0:-1]
        rest = api.get(url, params={"limit": 2, "after": first["next_after"]}).json()
        assert [i["id"] for i in rest["items"]] == [ids[0]] and rest["next_after"] is None
        assert api.get(url, params={"limit": 0}).status_code == 422


def test_a_failing_llm_leaves_a_failed_interview_with_its_error(cluster, llm, run):
    pid, sid = run
    llm.behaviour.fault = lambda request: "500"
    with cluster.api() as api:
        agent = _agents(api, pid)[0]
    status, events = _ask(cluster, agent["id"], {"simulation_id": sid, "question": "Hello?"})
    assert status == 200
    done = events[-1]
    assert done["type"] == "done" and done["interview"]["status"] == "failed", events
    assert "HTTP 500" in done["interview"]["error"]
    with cluster.api() as api:
        kept = api.get(f"/api/simulations/{sid}/interviews").json()["items"]
    assert {"id": done["interview"]["id"], "status": "failed"}.items() <= next(
        i for i in kept if i["id"] == done["interview"]["id"]
    ).items()


def test_the_answer_is_kept_when_the_client_goes_away_mid_stream(cluster, llm, run):
    pid, sid = run
    llm.behaviour.stream_interval_s = 0.2
    with cluster.api() as api:
        agent = _agents(api, pid)[1]
    url = f"{cluster.url}/api/agents/{agent['id']}/interviews"
    headers = {"Authorization": f"Bearer {cluster.api_token}"}
    body = {"simulation_id": sid, "question": "Still there?"}
    with httpx.stream("POST", url, json=body, headers=headers, timeout=60) as resp:
        first = json.loads(next(resp.iter_lines()))
        assert first["type"] == "delta"
    # Gone after one piece: the manager reads the worker's stream to its end all the same.
    with cluster.api() as api:
        kept = wait_for(
            lambda: [
                i
                for i in api.get(f"/api/agents/{agent['id']}/interviews").json()["items"]
                if i["question"] == "Still there?" and i["status"] != "answering"
            ],
            30,
            what="the interview finished",
        )
    assert kept[0]["status"] == "answered" and kept[0]["answer"] == ANSWER


def test_refusals_name_their_reason(cluster, run):
    pid, sid = run
    with cluster.api() as api:
        agents = _agents(api, pid)
        other = deploy(cluster, size=5, name="others")
        stranger = _agents(api, other)[0]
        no_llm = start(api, level_k(other, rounds=1))["id"]
        assert finish(api, no_llm)["status"] == "completed"
    aid = agents[2]["id"]

    status, body = _ask(cluster, aid, {"simulation_id": sid, "question": "   "})
    assert status == 422 and body[0]["detail"][0]["loc"] == ["body", "question"]
    status, body = _ask(cluster, aid, {"simulation_id": sid, "question": "x" * 2001})
    assert status == 422 and body[0]["detail"][0]["loc"] == ["body", "question"]
    status, body = _ask(cluster, aid, {"simulation_id": 999_999, "question": "Hi?"})
    assert status == 404 and "999999" in body[0]["detail"]
    status, body = _ask(cluster, (pid << 32) | 999, {"simulation_id": sid, "question": "Hi?"})
    assert status == 404
    status, body = _ask(cluster, stranger["id"], {"simulation_id": sid, "question": "Hi?"})
    assert status == 422 and body[0]["detail"][0]["loc"] == ["body", "simulation_id"]
    status, body = _ask(cluster, stranger["id"], {"simulation_id": no_llm, "question": "Hi?"})
    assert status == 409 and "no LLM policy" in body[0]["detail"]
    status, body = _ask(
        cluster, aid, {"simulation_id": sid, "question": "Hi?"}, token=cluster.viewer_token
    )
    assert status == 403
    with cluster.api() as api:
        viewer = {"Authorization": f"Bearer {cluster.viewer_token}"}
        listed = api.get(f"/api/agents/{aid}/interviews", headers=viewer)
        assert listed.status_code == 200
        assert api.get(f"/api/simulations/{sid}/interviews", headers=viewer).status_code == 200
        assert api.get("/api/simulations/999999/interviews").status_code == 404
        assert api.get(f"/api/agents/{aid}/interviews").json()["items"] == []


def test_an_agent_its_worker_no_longer_hosts_is_409_and_nothing_is_kept(cluster, run):
    pid, sid = run
    with cluster.api() as api:
        agent = _agents(api, pid)[7]
        address = api.get(f"/api/workers/{agent['worker_id']}").json()["address"]

    async def drop() -> None:
        async with worker_client(address) as client:
            await client.delete_agents(ids=[agent["id"]])

    asyncio.run(drop())
    status, body = _ask(cluster, agent["id"], {"simulation_id": sid, "question": "Hi?"})
    assert status == 409 and "not hosted" in body[0]["detail"], body
    with cluster.api() as api:
        assert api.get(f"/api/agents/{agent['id']}/interviews").json()["items"] == []


def test_cli_prints_the_answer_and_fails_in_one_line(cluster, run):
    pid, sid = run
    with cluster.api() as api:
        agent = _agents(api, pid)[4]
    env = {
        **os.environ,
        "POPULACE_MANAGER_URL": cluster.url,
        "POPULACE_API_TOKEN": cluster.api_token,
    }

    def populace(*args):
        return subprocess.run(
            populace_cmd(*args), env=env, capture_output=True, text=True, timeout=120
        )

    ok = populace("agent", "interview", str(agent["id"]), "--simulation", str(sid), "Why?")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == ANSWER
    bad = populace("agent", "interview", str(agent["id"]), "--simulation", "999999", "Why?")
    assert bad.returncode != 0
    assert bad.stderr.strip().count("\n") == 0 and "404" in bad.stderr, bad.stderr
