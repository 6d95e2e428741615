"""The LLM policy inside the sub-environment, against real OpenAI-compatible servers over real
HTTP (in-process bench.openai_server): prompts, memory per simulation, history, parts, late and
invalid agents, raw responses, model mixtures, and the policy's validation."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from bench.openai_server import OpenAIServer, Request
from tests.support_rounds_llm import (
    MODEL,
    RULE,
    USER,
    agent_of,
    by_agent,
    decisions,
    llm_message,
    make_store,
    play,
    round_request,
)
from worker_server.llm import LlmClient
from worker_server.llm.answers import NumberConstraint
from worker_server.llm.templates import Feedback
from worker_server.rounds import (
    AgentSlots,
    Cohort,
    InvalidRound,
    RoundContext,
    SubEnvironment,
)
from worker_server.rounds import llm as llm_module
from worker_server.rounds.wire import llm_policy, round_spec
from worker_server.rpc import worker_pb2 as pb


@pytest.fixture
def server():
    with OpenAIServer(model=MODEL, answer=by_agent) as running:
        yield running


@pytest.fixture
async def client():
    llm = LlmClient(backoff_base_s=0.01)
    yield llm
    await llm.aclose()


async def test_every_agent_answers_with_its_own_prompt(server, client):
    server.behaviour.latency_s = 0.05
    store = make_store(50)
    subenv = SubEnvironment(store, AgentSlots(256))
    chunks, aggregate = await play(subenv, round_spec(round_request(llm_message(server)), client))
    assert decisions(chunks) == {i: float(i % 90) for i in range(50)}
    assert aggregate.count == 50 and aggregate.n_invalid == aggregate.n_late == 0
    assert server.max_in_flight == 16, "the endpoint's default cap, all from one cohort"
    prompts = {agent_of(r): r.prompt for r in (_request(b) for b in server.bodies)}
    assert prompts[3] == "You are agent-3 (doctorate).\n\nRound 1 of a game over [0, 100]."
    assert aggregate.prompt_tokens == sum(r.prompt_tokens for r in server.records)
    assert aggregate.completion_tokens == 50


def _request(body: dict) -> Request:
    prompt = "\n".join(m["content"] for m in body["messages"])
    return Request(path="", body=body, prompt=prompt, attempt=1)


async def test_history_and_memory_belong_to_one_simulation(server, client):
    store = make_store(6)
    subenv = SubEnvironment(store, AgentSlots(256))
    invalid_first = {0}

    def answer(req):
        if agent_of(req) in invalid_first and "Round 1 of" in req.prompt:
            return "no idea"
        return by_agent(req)

    server.behaviour.answer = answer
    llm = llm_message(server)
    await play(subenv, round_spec(round_request(llm, 1, simulation_id="A"), client))
    # Round 2 had no winner (so the manager left it out of the history); round 3 follows.
    await play(subenv, round_spec(round_request(llm, 2, simulation_id="A"), client))
    server.reset()
    history = [pb.RoundFeedback(round=1, winner=20.5, mean=30.75)]
    spec = round_spec(round_request(llm, 3, simulation_id="A", history=history), client)
    await play(subenv, spec)
    prompts = {agent_of(_request(b)): _request(b).prompt for b in server.bodies}
    assert (
        "Round 1: you chose 5; the winning number was 20.5 (the mean was 30.75).\n" in (prompts[5])
    )
    assert "Round 1: you gave no valid number; the winning number was 20.5" in prompts[0]
    memory = {a.id: a.memory for a in store.list_agents("p", None, 10)[0]}
    assert memory[5] == [5.0, 6.0, 7.0] and memory[0] == [1.0, 2.0]

    # Another simulation on the same population starts the agents afresh.
    server.reset()
    spec = round_spec(round_request(llm, 2, simulation_id="B", history=history), client)
    await play(subenv, spec)
    prompts = {agent_of(_request(b)): _request(b).prompt for b in server.bodies}
    assert "Round 1: the winning number was 20.5 (the mean was 30.75).\nRound 2" in prompts[5]
    assert {a.id: a.memory for a in store.list_agents("p", None, 10)[0]}[5] == [6.0]


async def test_unparseable_answers_are_invalid_and_responses_come_back(server, client):
    server.behaviour.answer = lambda req: "maybe forty" if agent_of(req) % 3 == 0 else "12.5"
    store = make_store(30)
    subenv = SubEnvironment(store, AgentSlots(256))
    spec = round_spec(round_request(llm_message(server), store_responses=True), client)
    chunks, aggregate = await play(subenv, spec)
    invalid = {i for c in chunks for i in c.invalid_ids.tolist()}
    assert invalid == {i for i in range(30) if i % 3 == 0} and aggregate.n_invalid == 10
    for chunk in chunks:
        assert chunk.responses == ["12.5"] * len(chunk.ids)
        assert chunk.invalid_responses == ["maybe forty"] * len(chunk.invalid_ids)
    assert aggregate.count == 20 and aggregate.sum == 20 * 12.5


async def test_cot_answers_are_parsed_and_not_constrained(server, client):
    server.behaviour.answer = lambda req: "Half of 50 is 25, two thirds of that... Answer: 17"
    store = make_store(4)
    spec = round_spec(
        round_request(llm_message(server, answer_mode="cot", endpoints=[_vllm(server)])), client
    )
    chunks, _ = await play(SubEnvironment(store, AgentSlots(8)), spec)
    assert set(decisions(chunks).values()) == {17.0}
    assert all("structured_outputs" not in b for b in server.bodies)
    assert all(b["max_tokens"] == 512 for b in server.bodies), "cot's default budget"


def _vllm(server, model=MODEL, cap=0):
    return pb.LlmEndpoint(base_url=server.base_url, model=model, server="vllm", max_concurrency=cap)


async def test_basic_answers_ask_each_server_for_a_number(server, client):
    store = make_store(4)
    endpoints = [pb.LlmEndpoint(base_url=server.base_url + "/v1", model=MODEL, server="llama_cpp")]
    spec = round_spec(
        round_request(llm_message(server, endpoints=endpoints, api="completions")), client
    )
    await play(SubEnvironment(store, AgentSlots(8)), spec)
    body = server.bodies[0]
    assert body["grammar"] == NumberConstraint.for_range(0, 100).grammar, "the game's range"
    assert body["prompt"].startswith("You are agent-") and body["max_tokens"] == 16
    assert server.stats()["by_path"] == {"/v1/completions": 4}


async def test_extraction_call_rescues_a_free_text_answer(server, client):
    def answer(req):
        if "Player's answer" in req.prompt:  # the extraction call: the number in the text
            return re.search(r"pick (\d+)", req.prompt).group(1)
        return f"I would pick {agent_of(req) + 10} since it is low."

    server.behaviour.answer = answer
    store = make_store(8)
    spec = round_spec(round_request(llm_message(server, extraction_call=True)), client)
    chunks, aggregate = await play(SubEnvironment(store, AgentSlots(64)), spec)
    assert decisions(chunks) == {i: float(i + 10) for i in range(8)}
    assert server.requests == 16 and aggregate.n_invalid == 0


async def test_a_model_mixture_routes_each_segment_to_its_model():
    with (
        OpenAIServer(model="small", answer=lambda r: "10") as small,
        OpenAIServer(model="large", answer=lambda r: "90") as large,
    ):
        client = LlmClient()
        store = make_store(20)
        llm = pb.LlmPolicy(
            endpoints=[
                pb.LlmEndpoint(base_url=small.base_url, model="small"),
                pb.LlmEndpoint(base_url=large.base_url, model="large"),
            ],
            default_model="small",
            model_attribute="education",
            model_by_category={"doctorate": "large"},
            user_template=USER,
            api="chat",
            answer_mode="basic",
        )
        chunks, _ = await play(
            SubEnvironment(store, AgentSlots(64)), round_spec(round_request(llm), client)
        )
        await client.aclose()
    assert decisions(chunks) == {i: 90.0 if i % 2 else 10.0 for i in range(20)}
    assert small.requests == large.requests == 10


async def test_the_round_deadline_counts_unfinished_agents_late_and_keeps_the_rest(server, client):
    server.behaviour.fault = lambda req: "hang" if agent_of(req) % 4 == 0 else None
    store = make_store(40)
    spec = round_spec(round_request(llm_message(server, max_retries=0), deadline_s=1.5), client)
    chunks, aggregate = await play(SubEnvironment(store, AgentSlots(256)), spec)
    late = {i for c in chunks for i in c.late_ids.tolist()}
    assert late == {i for i in range(40) if i % 4 == 0}
    assert aggregate.n_late == 10 and aggregate.count == 30
    memory = {a.id: a.memory for a in store.list_agents("p", None, 100)[0]}
    assert memory[0] == [] and memory[1] == [1.0]


async def test_large_cohorts_report_in_parts(server, client, monkeypatch):
    # 100 agents, 16 at a time, 0.1 s each: seven waves, each more than PART_AGENTS answers.
    server.behaviour.latency_s = 0.1
    monkeypatch.setattr(llm_module, "PART_AGENTS", 10)
    store = make_store(100)
    spec = round_spec(round_request(llm_message(server)), client)
    population = store.population("p")
    context = RoundContext(1, 7, RULE, None)
    parts = [
        part async for part in spec.policy.decide_parts(Cohort(population, np.arange(100)), context)
    ]
    assert len(parts) >= 3, "decisions stream while the cohort runs"
    positions = np.concatenate([p.positions for p in parts])
    assert sorted(positions.tolist()) == list(range(100))
    values = np.concatenate([p.values for p in parts])
    assert values.tolist() == [float(i % 90) for i in positions.tolist()]


async def test_prompt_placeholders_must_be_known_to_the_population(server, client):
    store = make_store(3)
    subenv = SubEnvironment(store, AgentSlots(8))
    bad = round_spec(
        round_request(llm_message(server, system_template="Your {income} matters")), client
    )
    with pytest.raises(InvalidRound, match=r"llm.system_template: unknown placeholder \{income\}"):
        subenv.run(bad)
    other = round_spec(
        round_request(
            llm_message(server, model_attribute="income", model_by_category={"x": MODEL})
        ),
        client,
    )
    with pytest.raises(InvalidRound, match="llm.model_attribute 'income' is not an attribute"):
        subenv.run(other)
    assert server.requests == 0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"endpoints": []}, "llm.endpoints must not be empty"),
        ({"api": "responses"}, "llm.api must be chat or completions"),
        ({"answer_mode": "json"}, "llm.answer_mode must be basic or cot"),
        ({"user_template": " "}, "llm.user_template must not be empty"),
        ({"default_model": ""}, "llm.default_model must not be empty"),
        ({"default_model": "gpt"}, "llm.default_model: model 'gpt' is not served"),
        (
            {"model_attribute": "education", "model_by_category": {"doctorate": "gpt"}},
            r"llm.model_by_category\['doctorate'\]: model 'gpt' is not served",
        ),
        ({"model_by_category": {"doctorate": MODEL}}, "needs llm.model_attribute"),
        ({"max_tokens": -1}, "llm.max_tokens must be in 0..32768"),
        ({"temperature": math.nan}, r"llm.temperature must be in \[0, 2\]"),
        ({"request_timeout_s": -1}, "llm.request_timeout_s must be in"),
        ({"max_retries": 11}, "llm.max_retries must be in 0..10"),
        (
            {"endpoints": [pb.LlmEndpoint(base_url="file:///etc", model=MODEL)]},
            r"llm.endpoints\[0\].base_url must be an http\(s\) URL",
        ),
        (
            {"endpoints": [pb.LlmEndpoint(base_url="http://h:1", model=MODEL, server="tgi")]},
            r"llm.endpoints\[0\].server must be one of vllm, llama_cpp, openai",
        ),
        (
            {"endpoints": [pb.LlmEndpoint(base_url="http://h:1", model="")]},
            r"llm.endpoints\[0\].model must not be empty",
        ),
    ],
)
def test_bad_llm_policies_name_the_field(change, message):
    class Fake:
        base_url = "http://127.0.0.1:9"

    llm = llm_message(Fake())
    for name, value in change.items():
        llm.ClearField(name)
        if isinstance(value, list):
            getattr(llm, name).extend(value)
        elif isinstance(value, dict):
            getattr(llm, name).update(value)
        else:
            setattr(llm, name, value)
    with pytest.raises(InvalidRound, match=message):
        llm_policy(llm, LlmClient())


def test_defaults_fill_in():
    class Fake:
        base_url = "http://127.0.0.1:9/v1/"

    policy = llm_policy(llm_message(Fake(), request_timeout_s=0), LlmClient())
    assert policy.request_timeout_s == 30 and policy.max_tokens == 16
    assert policy.endpoints[0].base_url == "http://127.0.0.1:9"
    assert policy.endpoints[0].max_concurrency == 16 and policy.endpoints[0].server == "openai"
    spec = round_spec(
        round_request(
            llm_message(Fake()),
            2,
            simulation_id="s",
            history=[pb.RoundFeedback(round=1, winner=3.0)],
            store_responses=True,
        ),
        LlmClient(),
    )
    assert spec.history == (Feedback(1, 3.0, None),)
    assert spec.simulation_id == "s" and spec.store_responses


SHARED_USER = "A {education} graduate plays round {round} of a game over [{min}, {max}]."


def by_education(req) -> str:
    return "11" if "doctorate" in req.prompt else "42"


@pytest.mark.parametrize(
    "overrides, requests",
    [
        ({}, 2),  # temperature 0: one request per distinct prompt
        ({"each_agent_asks": True}, 40),
        ({"temperature": 0.5}, 40),  # sampling: every agent draws its own answer
    ],
)
async def test_identical_prompts_share_one_request_at_temperature_0(
    server, client, overrides, requests
):
    server.behaviour.answer = by_education
    server.behaviour.latency_s = 0.02
    store = make_store(40)
    spec = round_spec(
        round_request(
            llm_message(server, user_template=SHARED_USER, **overrides), store_responses=True
        ),
        client,
    )
    chunks, aggregate = await play(SubEnvironment(store, AgentSlots(256)), spec)
    assert server.requests == requests
    # Every agent is answered, each with its own prompt's answer.
    assert decisions(chunks) == {i: (11.0 if i % 2 else 42.0) for i in range(40)}
    assert aggregate.count == 40
    assert [r for c in chunks for r in c.responses] == [
        "11" if i % 2 else "42" for c in chunks for i in c.ids.tolist()
    ]
    # Usage is what the servers reported, once per request actually sent.
    assert aggregate.prompt_tokens == sum(r.prompt_tokens for r in server.records)
    assert sum(e.requests for e in aggregate.endpoints) == requests
