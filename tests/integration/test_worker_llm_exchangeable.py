"""Exchangeable agents on a real worker process: at temperature > 0 a prompt that more than
ASK_BEFORE_READING agents share has its answer distribution read once (a logprob tree) and they
all draw from it; a prompt fewer share is asked by each. The server is bench.openai_server
checking requests as the pinned vLLM does."""

from __future__ import annotations

import numpy as np
import pytest

from bench.openai_server import OpenAIServer, default_answer
from tests.support_worker_llm import MODEL, batched_policy, deploy_agents, play, round_request
from worker_server.rounds.llm import ASK_BEFORE_READING


@pytest.fixture
def vllm():
    with OpenAIServer(model=MODEL, answer=default_answer, validate="vllm") as running:
        yield running


def generations(server) -> list:
    return [r for r in server.records if r.body.get("max_tokens") != 1]


def tree_reads(server) -> list:
    return [r for r in server.records if r.body.get("max_tokens") == 1]


async def test_agents_with_one_prompt_draw_from_a_distribution_read_once(client, vllm):
    population = await deploy_agents(client, 300)
    policy = batched_policy(vllm, 1, user_template="Pick a number. Answer:", temperature=1.0)
    request = round_request(population, policy, store_responses=True)
    batches, partial = await play(client, request)

    assert partial.count == 300 and partial.n_invalid == partial.n_late == 0
    assert not generations(vllm), "300 agents share the prompt: every one of them drew"
    reads = tree_reads(vllm)
    assert 0 < len(reads) < 300 - ASK_BEFORE_READING
    prefixes = [r.body["prompt"] for r in reads]
    assert len(set(prefixes)) == len(prefixes), "read once: no prefix asked twice"
    assert all(r.body["logprobs"] == 20 for r in reads)
    values = np.array(list(batches.decided.values()))
    assert ((values >= 0) & (values <= 100)).all()
    assert len(set(values.tolist())) > 1, "each agent drew with its own uniform"
    # The raw answer kept for a drawn agent is the text of the value it drew.
    assert all(float(batches.responses[i]) == v for i, v in batches.decided.items())

    # The same round again (same seed): every agent draws the same answer.
    vllm.reset()
    again, _ = await play(client, round_request(population, policy, store_responses=True))
    assert again.decided == batches.decided


async def test_each_asks_and_distinct_prompts_never_read_a_distribution(client, vllm):
    population = await deploy_agents(client, 40)
    each = batched_policy(
        vllm, 1, user_template="Pick a number. Answer:", temperature=1.0, each_agent_asks=True
    )
    await play(client, round_request(population, each))
    assert len(generations(vllm)) == 40 and not tree_reads(vllm)

    vllm.reset()
    distinct = batched_policy(vllm, 1, temperature=1.0)  # the prompt names the agent
    await play(client, round_request(population, distinct))
    assert len(generations(vllm)) == 40 and not tree_reads(vllm)


async def test_a_prompt_few_agents_share_is_asked_by_each(client, vllm):
    population = await deploy_agents(client, ASK_BEFORE_READING)
    shared = batched_policy(vllm, 1, user_template="Pick a number. Answer:", temperature=1.0)
    _, partial = await play(client, round_request(population, shared))
    assert partial.count == ASK_BEFORE_READING
    assert len(generations(vllm)) == ASK_BEFORE_READING and not tree_reads(vllm)


async def test_a_distribution_that_cannot_be_read_leaves_its_agents_to_ask_each(client):
    """A server that fails the tree's requests (llama.cpp started without logprobs fails them
    too): the agents sharing the prompt ask one by one, each with its own seed, and all answer."""

    def no_reads(request):
        return "500" if request.body.get("max_tokens") == 1 else None

    with OpenAIServer(
        model=MODEL, answer=default_answer, fault=no_reads, validate="vllm"
    ) as server:
        population = await deploy_agents(client, 40)
        shared = batched_policy(server, 4, user_template="Pick a number. Answer:", temperature=1.0)
        _, partial = await play(client, round_request(population, shared))
        assert partial.count == 40 and partial.n_invalid == 0 and partial.n_late == 0
        asked = generations(server)
        assert len(asked) == 40, "one agent a request: a batch would give them one draw"
        assert len({r.body["seed"] for r in asked}) == 40
        assert tree_reads(server), "the read was tried first"
