"""LLM rounds, probes and personas end to end: a real worker process, driven over real gRPC,
calls real OpenAI-compatible servers (bench.openai_server) over real HTTP."""

from __future__ import annotations

import asyncio
import re

import grpc
import numpy as np
import pytest

from backend.rounds.fanout import RoundFailed, cancel_round, run_round
from bench.openai_server import OpenAIServer, Record, Request
from tests.support import free_port, wait_for
from tests.support_worker_llm import (
    MODEL,
    USER,
    agent_of,
    by_agent,
    deploy_agents,
    play,
    round_request,
)
from worker_server.rpc import worker_pb2 as pb


@pytest.fixture
def server():
    with OpenAIServer(model=MODEL, answer=by_agent) as running:
        yield running


def llm_policy(*servers, caps=(), **fields) -> pb.Policy:
    endpoints = [
        pb.LlmEndpoint(base_url=s.base_url, model=MODEL, max_concurrency=cap)
        for s, cap in zip(servers, caps or [0] * len(servers), strict=True)
    ]
    settings = {
        "default_model": MODEL,
        "user_template": USER,
        "api": "chat",
        "answer_mode": "basic",
        "temperature": 0.7,
        "request_timeout_s": 20,
        "max_retries": 2,
    }
    settings.update(fields)
    return pb.Policy(llm=pb.LlmPolicy(endpoints=endpoints, **settings))


async def test_every_agent_answers_and_the_aggregate_matches_the_servers_answers(client, server):
    server.behaviour.latency_s = 0.02
    population = await deploy_agents(client, 300)
    request = round_request(population, llm_policy(server), store_responses=True)
    batches, partial = await play(client, request)

    answered = {agent_of(_parsed(r)): r.text for r in server.records}
    assert sorted(answered) == population.ids.tolist(), "one request per agent"
    assert batches.decided == {i: float(text) for i, text in answered.items()}
    assert batches.responses == answered, "raw answers come back aligned with the agent ids"
    values = np.array([float(t) for t in answered.values()])
    assert partial.count == 300 and partial.n_invalid == partial.n_late == 0
    assert partial.sum == pytest.approx(values.sum())
    assert partial.histogram == np.histogram(values, bins=101, range=(0, 100))[0].tolist()
    assert partial.prompt_tokens == sum(r.prompt_tokens for r in server.records) > 0
    assert partial.completion_tokens == 300 and partial.llm_errors == 0
    # One cohort: the endpoint's cap (16 by default) was the only limit on concurrency.
    assert server.max_in_flight == 16
    body = server.bodies[0]
    assert body["temperature"] == 0.7 and body["max_tokens"] == 16 and "seed" in body


def _parsed(record: Record) -> Request:
    prompt = "\n".join(m["content"] for m in record.body["messages"])
    return Request(path=record.path, body=record.body, prompt=prompt, attempt=1)


async def test_unparseable_answers_are_invalid(client, server):
    server.behaviour.answer = lambda r: "hmm, forty-ish" if agent_of(r) % 2 else by_agent(r)
    population = await deploy_agents(client, 40)
    batches, partial = await play(
        client, round_request(population, llm_policy(server), store_responses=True)
    )
    odd = {i for i in population.ids.tolist() if i % 2}
    assert set(batches.invalid) == odd and partial.n_invalid == len(odd)
    assert set(batches.invalid.values()) == {"hmm, forty-ish"}
    assert set(batches.decided) == set(population.ids.tolist()) - odd


async def test_extraction_call_rescues_a_free_text_answer(client, server):
    def answer(request):
        if "Player's answer" in request.prompt:
            return re.search(r"go with (\d+)", request.prompt).group(1)
        return f"Tough one. I will go with {agent_of(request) % 50} this time."

    server.behaviour.answer = answer
    population = await deploy_agents(client, 30)
    policy = llm_policy(server, extraction_call=True)
    batches, partial = await play(client, round_request(population, policy))
    assert batches.decided == {i: float(i % 50) for i in population.ids.tolist()}
    assert partial.n_invalid == 0 and server.requests == 60


async def test_a_hung_request_is_cut_at_the_agents_deadline_and_the_round_closes(client, server):
    server.behaviour.fault = lambda r: "hang" if agent_of(r) % 5 == 0 else None
    population = await deploy_agents(client, 50)
    policy = llm_policy(server, request_timeout_s=1.0, max_retries=0)
    batches, partial = await play(client, round_request(population, policy))
    hung = {i for i in population.ids.tolist() if i % 5 == 0}
    assert batches.late == hung and partial.n_late == len(hung)
    assert partial.count == 50 - len(hung) and partial.n_invalid == 0
    assert partial.llm_errors == 0, "a timeout alone is lateness, not an error"
    # The worker hung up on the hung requests: the server stops working on them.
    wait_for(lambda: server.disconnected == len(hung), timeout=10, what="hang-ups")


async def test_server_errors_are_retried_then_succeed(client, server):
    server.behaviour.fault = lambda r: "500" if r.attempt == 1 else None
    population = await deploy_agents(client, 20)
    batches, partial = await play(client, round_request(population, llm_policy(server)))
    assert partial.count == 20 and partial.llm_errors == 0
    assert server.stats()["by_status"] == {"500": 20, "200": 20}


async def test_errors_after_the_retries_are_counted(client, server):
    server.behaviour.fault = lambda r: "429" if agent_of(r) % 4 == 0 else None
    population = await deploy_agents(client, 40)
    policy = llm_policy(server, max_retries=1)
    batches, partial = await play(client, round_request(population, policy))
    failing = {i for i in population.ids.tolist() if i % 4 == 0}
    assert partial.llm_errors == len(failing) and set(batches.invalid) == failing
    assert server.stats()["by_status"]["429"] == 2 * len(failing), "one try and one retry each"


async def test_least_loaded_routing_spreads_over_two_endpoints_within_their_caps(client):
    with (
        OpenAIServer(model=MODEL, answer=by_agent, latency_s=0.05) as first,
        OpenAIServer(model=MODEL, answer=by_agent, latency_s=0.05) as second,
    ):
        population = await deploy_agents(client, 200)
        policy = llm_policy(first, second, caps=(3, 5))
        batches, partial = await play(client, round_request(population, policy))
        assert partial.count == 200
        assert first.requests + second.requests == 200
        assert (first.max_in_flight, second.max_in_flight) == (3, 5)
        assert second.requests > first.requests > 0


async def test_memory_is_per_simulation_and_history_reaches_the_prompt(client, server):
    population = await deploy_agents(client, 12)
    policy = llm_policy(server)
    await play(client, round_request(population, policy, simulation_id="sim-a"))
    first_choice = {agent_of(_parsed(r)): r.text for r in server.records}
    server.reset()
    history = [pb.RoundFeedback(round=1, winner=31.25, mean=46.875)]
    await play(
        client,
        round_request(population, policy, round=2, simulation_id="sim-a", history=history),
    )
    agent = population.ids[4].item()
    prompt = next(_parsed(r).prompt for r in server.records if agent_of(_parsed(r)) == agent)
    assert (
        f"Round 1: you chose {first_choice[agent]}; the winning number was 31.25 "
        "(the mean was 46.88).\nThis is round 2."
    ) in prompt
    memory = await _memory(client, population)
    assert memory[agent] == [float(first_choice[agent]), float(first_choice[agent]) + 1]

    server.reset()
    await play(
        client,
        round_request(population, policy, round=2, simulation_id="sim-b", history=history),
    )
    prompt = next(_parsed(r).prompt for r in server.records if agent_of(_parsed(r)) == agent)
    assert "you chose" not in prompt, "a new simulation starts the agents afresh"
    assert "Round 1: the winning number was 31.25" in prompt
    assert (await _memory(client, population))[agent] == [float(first_choice[agent]) + 1]


async def _memory(client, population) -> dict[int, list[float]]:
    reply = await client.list_agents(population.population_id, limit=1000)
    return {a.id: list(a.memory) for a in reply.agents}


async def test_cancel_stops_the_requests_in_flight(client, server):
    server.behaviour.latency_s = 60
    population = await deploy_agents(client, 10)
    request = round_request(population, llm_policy(server, request_timeout_s=120))
    running = asyncio.create_task(run_round([client], request))
    await asyncio.to_thread(wait_for, lambda: server.in_flight == 10, 15, 0.05, "requests out")
    assert await cancel_round([client], request.round_id) == 1
    with pytest.raises(RoundFailed, match="CANCELLED"):
        await asyncio.wait_for(running, timeout=15)
    await asyncio.to_thread(wait_for, lambda: server.disconnected == 10, 15, 0.05, "hang-ups")
    assert server.in_flight == 0
    info = await client.info()
    assert info.rounds_running == 0


async def test_a_bad_llm_policy_is_invalid_argument_naming_the_field(client, server):
    population = await deploy_agents(client, 3)
    for policy, message in [
        (llm_policy(), "llm.endpoints must not be empty"),
        (llm_policy(server, api="responses"), "llm.api must be chat or completions"),
        (llm_policy(server, user_template="{income}"), "unknown placeholder {income}"),
    ]:
        with pytest.raises(RoundFailed, match="INVALID_ARGUMENT") as err:
            await run_round([client], round_request(population, policy))
        assert message in str(err.value)
    assert server.requests == 0


async def test_probe_reports_each_endpoint(client):
    gone = f"http://127.0.0.1:{free_port()}"
    with (
        OpenAIServer(model=MODEL, models=["other-model"]) as server,
        OpenAIServer(model="/models/gemma-3-270m.gguf") as single,
    ):
        reply = await client.probe_llm(
            [
                pb.LlmEndpoint(base_url=server.base_url, model=MODEL),
                pb.LlmEndpoint(base_url=gone, model=MODEL),
                pb.LlmEndpoint(base_url=server.base_url + "/v1", model="missing-model"),
                pb.LlmEndpoint(base_url=server.base_url + "/nothing-here", model=MODEL),
                pb.LlmEndpoint(base_url=single.base_url, model="gemma"),
            ],
            timeout_s=3,
        )
    ok, unreachable, wrong, no_api, lenient = reply.endpoints
    assert ok.ok and ok.error == "" and ok.base_url == server.base_url and ok.latency_s, (
        "its latency is measured"
    )
    assert not unreachable.ok and unreachable.error == f"connection refused to {gone}"
    assert not wrong.ok
    assert (
        wrong.error == "model 'missing-model' not served (serves: 'tiny-test-model', 'other-model')"
    )
    assert not no_api.ok and no_api.error.startswith(
        f"HTTP 404 from {server.base_url}/nothing-here/v1/models"
    )
    # A server listing exactly one model answers for any name (llama.cpp): ok, with a note.
    assert lenient.ok and lenient.error == (
        "serves one model, '/models/gemma-3-270m.gguf': requests for 'gemma' go to it"
    )


async def test_probe_of_a_bad_url_is_invalid_argument(client):
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await client.probe_llm([pb.LlmEndpoint(base_url="gpu-3:8000", model=MODEL)])
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "endpoints[0].base_url must be an http(s) URL" in err.value.details()


async def test_generate_personas_falls_back_and_counts(client, server):
    server.behaviour.answer = lambda r: f"  A persona for: {r.prompt}  "
    failing = {2, 5}
    server.behaviour.fault = lambda r: "500" if r.seed - 100 - 10 in failing else None
    request = pb.GeneratePersonasRequest(
        endpoints=[pb.LlmEndpoint(base_url=server.base_url, model=MODEL, max_concurrency=4)],
        model=MODEL,
        metaprompt="Describe a {occupation} with {education} education.",
        fallback_template="You are a {occupation}.",
        attributes=[
            pb.AttributeColumn(
                name="occupation", categories=["farmer", "chemist"], codes=[0, 1] * 4
            ),
            pb.AttributeColumn(
                name="education", categories=["no", "a PhD"], codes=[0, 0, 1, 1] * 2
            ),
        ],
        count=8,
        max_tokens=40,
        temperature=0.9,
        seed=100,
        first_index=10,
    )
    reply = await client.generate_personas(request, timeout=60)
    occupations = ["farmer", "chemist"] * 4
    educations = ["no", "no", "a PhD", "a PhD"] * 2
    for i, persona in enumerate(reply.personas):
        if i in failing:
            assert persona == f"You are a {occupations[i]}."
        else:
            prompt = f"Describe a {occupations[i]} with {educations[i]} education."
            assert persona == f"A persona for: {prompt}"
    assert reply.n_fallback == 2
    assert reply.completion_tokens == sum(r.completion_tokens for r in server.records) > 0
    ok_bodies = [r.body for r in server.records if r.status == 200]
    assert sorted(b["seed"] for b in ok_bodies) == [110 + i for i in range(8) if i not in failing]
    assert {b["max_tokens"] for b in ok_bodies} == {40} and server.max_in_flight <= 4
    assert all("prompt" in b for b in ok_bodies), "the completions API"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"endpoints": []}, "endpoints must not be empty"),
        ({"count": 3}, "attributes[0] ('occupation'): 2 codes for count 3"),
        ({"metaprompt": "A {hobby}"}, "metaprompt: unknown placeholder {hobby}"),
        ({"model": "gpt"}, "model 'gpt' is not served by any endpoint"),
    ],
)
async def test_generate_personas_rejects_a_bad_request(client, change, message):
    request = pb.GeneratePersonasRequest(
        endpoints=[pb.LlmEndpoint(base_url="http://127.0.0.1:9", model=MODEL)],
        model=MODEL,
        metaprompt="A {occupation}",
        fallback_template="A {occupation}",
        attributes=[pb.AttributeColumn(name="occupation", categories=["x"], codes=[0, 0])],
        count=2,
    )
    for name, value in change.items():
        request.ClearField(name)
        if isinstance(value, list):
            getattr(request, name).extend(value)
        else:
            setattr(request, name, value)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await client.generate_personas(request, timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert message in err.value.details()
