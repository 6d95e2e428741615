"""Batched LLM requests end to end: a real worker process sends prompt arrays to a real
OpenAI-compatible server (bench.openai_server, checking requests as the pinned vLLM does)."""

from __future__ import annotations

import math

import pytest

from backend.rounds.fanout import RoundFailed
from bench.openai_server import OpenAIServer, default_answer
from tests.support_worker_llm import (
    MODEL,
    agent_of,
    batched_policy,
    by_agent,
    deploy_agents,
    play,
    round_request,
)


@pytest.fixture
def vllm():
    with OpenAIServer(model=MODEL, answer=by_agent, validate="vllm") as running:
        yield running


async def test_prompt_arrays_carry_up_to_the_batch_and_answers_map_back_by_index(client, vllm):
    population = await deploy_agents(client, 100)
    request = round_request(population, batched_policy(vllm, 8), store_responses=True)
    batches, partial = await play(client, request)

    ok = [r for r in vllm.records if r.status == 200]
    assert len(ok) == len(vllm.records) == math.ceil(100 / 8), "every request full but the last"
    sizes = sorted(len(r.body["prompt"]) for r in ok)
    assert sizes == [4] + [8] * 12
    # Each agent's number is the one the server gave to its own prompt, by index.
    assert batches.decided == {i: float(by_agent_id(i)) for i in population.ids.tolist()}, (
        "every agent gets the answer to its own prompt"
    )
    assert batches.responses == {i: by_agent_id(i) for i in population.ids.tolist()}
    assert partial.count == 100 and partial.n_invalid == partial.n_late == 0
    assert partial.llm_errors == 0
    assert partial.prompt_tokens == sum(r.prompt_tokens for r in ok) > 0
    assert partial.completion_tokens == sum(r.completion_tokens for r in ok) == 100
    # vLLM's own fields: one seed per request, the number regex, a prompt array.
    for record in ok:
        assert isinstance(record.body["seed"], int)
        assert "regex" in record.body["structured_outputs"]
        assert all(isinstance(p, str) and agent_of_text(p) for p in record.body["prompt"])


def by_agent_id(agent_id: int) -> str:
    return str(agent_id % 97)  # round 1 of by_agent


def agent_of_text(prompt: str) -> int:
    return agent_of(type("R", (), {"prompt": prompt})())


async def test_a_failed_batch_is_one_error_and_each_of_its_agents_is_invalid(client, vllm):
    population = await deploy_agents(client, 40)
    first_of_failing = set()

    def fault(request):
        first = agent_of(request)  # the first agent of the array
        if first % 2 == 0:
            first_of_failing.add(first)
            return "500"
        return None

    vllm.behaviour.fault = fault
    request = round_request(population, batched_policy(vllm, 5, max_retries=0))
    batches, partial = await play(client, request)

    failing_bodies = [r.body for r in vllm.records if r.status == 500]
    failed_agents = {agent_of_text(p) for body in failing_bodies for p in body["prompt"]}
    assert failed_agents and set(batches.invalid) == failed_agents
    assert partial.llm_errors == len(failing_bodies), "a failed batch is one failed request"
    assert partial.count == 40 - len(failed_agents)
    answered = set(population.ids.tolist()) - failed_agents
    assert {i: batches.decided[i] for i in answered} == {i: float(by_agent_id(i)) for i in answered}


async def test_at_temperature_above_zero_a_batch_never_holds_one_prompt_twice(client, vllm):
    # Every agent's prompt is the same: with one seed per request, two copies of a prompt in
    # one array would get one draw, so each request carries one prompt (the repeats wait).
    vllm.behaviour.answer = default_answer
    population = await deploy_agents(client, 12)
    policy = batched_policy(vllm, 6, user_template="Pick a number. Answer:", each_agent_asks=True)
    batches, partial = await play(client, round_request(population, policy))
    assert partial.count == 12
    assert [len(r.body["prompt"]) if isinstance(r.body["prompt"], list) else 1
            for r in vllm.records] == [1] * 12  # fmt: skip


async def test_at_temperature_zero_identical_prompts_share_one_answer_in_batches(client, vllm):
    vllm.behaviour.answer = default_answer
    population = await deploy_agents(client, 30)
    policy = batched_policy(vllm, 8, user_template="Pick a number. Answer:", temperature=0.0)
    batches, partial = await play(client, round_request(population, policy))
    assert partial.count == 30 and len(set(batches.decided.values())) == 1
    assert len(vllm.records) == 1


async def test_a_batch_size_a_server_cannot_take_is_invalid_argument(client, vllm):
    population = await deploy_agents(client, 3)
    chat = batched_policy(vllm, 4, api="chat")
    with pytest.raises(RoundFailed, match="INVALID_ARGUMENT") as raised:
        await play(client, round_request(population, chat))
    assert "llm.endpoints[0].batch_size must be 1 with the chat API" in str(raised.value)

    llama = batched_policy(vllm, 4)
    llama.llm.endpoints[0].server = "llama_cpp"
    with pytest.raises(RoundFailed, match="INVALID_ARGUMENT") as raised:
        await play(client, round_request(population, llama))
    assert "llm.endpoints[0].batch_size must be 1 for a llama_cpp server" in str(raised.value)
    assert not vllm.records


async def test_a_batch_larger_than_a_runners_turn_is_sent_full(client, vllm):
    # A runner gives the event loop a turn every JOBS_PER_TURN agents it answers without
    # asking; agents it asks for still fill the whole batch.
    from worker_server.rounds.llm import JOBS_PER_TURN

    size = 2 * JOBS_PER_TURN + 8
    population = await deploy_agents(client, 2 * size)
    await play(client, round_request(population, batched_policy(vllm, size, cap=2)))
    assert sorted(len(r.body["prompt"]) for r in vllm.records) == [size, size]
