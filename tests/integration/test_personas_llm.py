"""LLM personas written by real worker processes against a real OpenAI-compatible HTTP server
of the test's own.

The server answers `/v1/completions` over real sockets, counts requests in flight, and can be
told to fail (500), hang (until the test releases them), or answer empty text for chosen agents (picked by the request seed).
The manager splits the population between the workers (GeneratePersonas); every request leaves
from a worker.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from backend.populations.personas import PersonaShare, generate_llm_personas, render_template
from backend.populations.sampling import attribute_dict, sample
from tests.support import stop_process, trust_test_workers, wait_for
from tests.support_completion_server import (
    METAPROMPT,
    SEED,
    TEMPLATE,
    CompletionServer,
    make_config,
)


@pytest.fixture(scope="module")
def workers(shared_manager):
    node = shared_manager.start_workers(procs=2)
    try:
        online = wait_for(
            lambda: (
                (ws := [w for w in shared_manager.workers() if w["state"] == "online"])
                and len(ws) == 2
                and ws
            ),
            timeout=30,
            what="two workers online",
        )
        trust_test_workers([w["address"] for w in online])
        yield [w["address"] for w in online]
    finally:
        stop_process(node)  # the module's manager does not own the nodes started on it


def shares(workers: list[str], size: int) -> list[PersonaShare]:
    """The first worker writes the first third, the second the rest."""
    cut = size // 3
    return [PersonaShare(workers[0], 0, cut), PersonaShare(workers[1], cut, size - cut)]


@pytest.fixture
def server():
    with CompletionServer() as running:
        yield running


async def test_prompts_carry_each_agents_attributes(server, workers):
    config = make_config(server.url, 60)
    population = sample(config)
    personas, failures = await generate_llm_personas(
        config.persona, population, shares(workers, 60)
    )
    assert failures == 0
    bodies = {body["seed"] - SEED: body for body in server.bodies}
    assert sorted(bodies) == list(range(60)), "one request per agent, seeded by its index"
    for i in range(60):
        prompt = METAPROMPT.format(**attribute_dict(population, i))
        body = bodies[i]
        assert body["model"] == "tiny-test-model"
        assert body["prompt"] == prompt
        assert body["max_tokens"] == 64
        assert body["temperature"] == 0.7
        assert personas[i] == f"PERSONA[{prompt}]"


async def test_concurrency_never_exceeds_the_cap(server, workers):
    server.behaviour.delay_s = 0.02
    config = make_config(server.url, 120, max_concurrency=6)
    progress = []
    personas, failures = await generate_llm_personas(
        config.persona,
        sample(config),
        shares(workers, 120),
        on_progress=lambda done, total: progress.append((done, total)),
    )
    assert failures == 0 and len(personas) == 120 and len(server.bodies) == 120
    # The cap is split between the workers by their shares (a third and two thirds).
    assert 2 <= server.max_in_flight <= 6
    assert progress[-1] == (120, 120)


async def test_failures_fall_back_to_the_template_and_are_counted(server, workers):
    server.behaviour.fail = {0, 7, 14, 21}
    server.behaviour.hang = {3, 25}
    server.behaviour.empty = {5}
    config = make_config(server.url, 30, max_concurrency=8, timeout_s=0.3)
    population = sample(config)
    # The hung requests are answered only after the call: it returns at all because they were
    # abandoned at timeout_s, not waited out (the timeout is a hang guard, not a speed bound).
    async with asyncio.timeout(60):
        personas, failures = await generate_llm_personas(
            config.persona, population, shares(workers, 30)
        )
    assert server.hung == {3, 25}, "the hanging requests reached the server and hung"
    server.behaviour.release.set()
    failed = {0, 7, 14, 21, 3, 25, 5}
    assert failures == len(failed)
    fallback = render_template(TEMPLATE, population, np.arange(30))
    for i in range(30):
        if i in failed:
            assert personas[i] == fallback[i] == TEMPLATE.format(**attribute_dict(population, i))
        else:
            prompt = METAPROMPT.format(**attribute_dict(population, i))
            assert personas[i] == f"PERSONA[{prompt}]"


async def test_unreachable_endpoint_falls_back_for_everyone(workers):
    with CompletionServer() as gone:
        url = gone.url
    config = make_config(url, 10, timeout_s=2)
    population = sample(config)
    personas, failures = await generate_llm_personas(
        config.persona, population, shares(workers, 10)
    )
    assert failures == 10
    assert personas == render_template(TEMPLATE, population, np.arange(10))


def test_a_deploy_with_llm_personas_stores_what_the_workers_wrote(server, workers, shared_manager):
    server.behaviour.fail = {4}
    config = make_config(server.url, 40)
    with shared_manager.api() as api:
        resp = api.post("/api/populations", json=config.model_dump(mode="json"))
        assert resp.status_code == 202, resp.text
        pid = resp.json()["id"]
        wait_for(
            lambda: api.get(f"/api/populations/{pid}").json()["status"] == "deployed",
            60,
            what="deployed",
        )
        agents = api.get("/api/agents", params={"population_id": pid, "limit": 100}).json()
        personas = [a["persona"] for a in agents["items"]]
        assert len(personas) == 40
        assert personas[4] == TEMPLATE.format(**agents["items"][4]["attributes"]), "fallback"
        written = [p for i, p in enumerate(personas) if i != 4]
        assert all(p.startswith("PERSONA[Write a persona for a ") for p in written), written[:3]
        assert len({body["seed"] for body in server.bodies}) == 40
        assert api.delete(f"/api/populations/{pid}").status_code == 202
        wait_for(
            lambda: api.get(f"/api/populations/{pid}").json()["status"] == "deleted",
            30,
            what="deleted",
        )
