"""Per-endpoint LLM usage in a round: from the client's counters through the LLM policy's cohort
parts into the partial aggregate and its protobuf, with a dead endpoint among two (real HTTP,
in-process bench.openai_server; the breakers' clock stepped by hand)."""

from __future__ import annotations

import numpy as np
import pytest

from bench.openai_server import OpenAIServer
from tests.support_rounds_llm import (
    MODEL,
    by_agent,
    decisions,
    llm_message,
    make_store,
    play,
    round_request,
)
from worker_server.llm import EndpointUsage, LlmClient
from worker_server.llm.breaker import COOLDOWN_S, FAILURE_THRESHOLD, TRIAL_REQUESTS
from worker_server.rounds import AgentSlots, Cohort, RoundContext, SubEnvironment
from worker_server.rounds.aggregate import Aggregator
from worker_server.rounds.policies import GameRule
from worker_server.rounds.wire import aggregate_message, round_spec
from worker_server.rpc import worker_pb2 as pb

N = 60


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def by_url(endpoints) -> dict[str, tuple[int, int, int]]:
    return {e.base_url: (e.requests, e.errors, e.skipped) for e in endpoints}


def fields(usage) -> tuple:
    return (
        usage.base_url,
        usage.model,
        usage.requests,
        usage.errors,
        usage.skipped,
        usage.last_error,
        usage.breaker_opened,
        usage.breaker_half_opened,
        usage.breaker_closed,
    )


@pytest.fixture
async def clocked():
    clock = Clock()
    client = LlmClient(backoff_base_s=0.001, clock=clock)
    yield clock, client
    await client.aclose()


async def test_a_round_routes_around_a_dead_endpoint_and_reports_each_endpoints_usage(clocked):
    clock, client = clocked
    with (
        OpenAIServer(model=MODEL, answer=by_agent) as healthy,
        OpenAIServer(model=MODEL, fault=lambda request: "500") as dead,
    ):
        store = make_store(N)
        subenv = SubEnvironment(store, AgentSlots(256))
        both = llm_message(
            endpoints=[
                # One request at a time: it opens after exactly FAILURE_THRESHOLD failures.
                pb.LlmEndpoint(base_url=dead.base_url, model=MODEL, max_concurrency=1),
                pb.LlmEndpoint(base_url=healthy.base_url, model=MODEL, max_concurrency=4),
            ],
            max_retries=2,
        )
        every_answer = {i: float(i % 90) for i in range(N)}

        # Round 1: the dead endpoint fails FAILURE_THRESHOLD times, then is left alone; its
        # agents' retries go to the healthy one, so every agent answers.
        chunks, aggregate = await play(subenv, round_spec(round_request(both, 1), client))
        assert decisions(chunks) == every_answer
        assert aggregate.count == N and aggregate.n_invalid == aggregate.llm_errors == 0
        assert dead.requests == FAILURE_THRESHOLD
        assert by_url(aggregate.endpoints) == {
            dead.base_url: (FAILURE_THRESHOLD, FAILURE_THRESHOLD, 0),
            healthy.base_url: (N, 0, 0),
        }
        assert healthy.requests == N
        reported = {e.base_url: e for e in aggregate.endpoints}[dead.base_url]
        assert reported.last_error.startswith(f"HTTP 500 from {dead.base_url}/v1/chat/")
        # ... and out on the wire.
        wire = aggregate_message(aggregate).aggregate.endpoints
        assert [fields(e) for e in wire] == [fields(e) for e in aggregate.endpoints]

        # Round 2, still inside the cooldown: the round's start half-opens the breaker, so a
        # few trials go to the dead endpoint (one at a time: its cap); they fail and it opens
        # again; their agents' retries, like every other agent, are answered by the healthy one.
        chunks, aggregate = await play(subenv, round_spec(round_request(both, 2), client))
        assert aggregate.count == N and dead.requests == FAILURE_THRESHOLD + TRIAL_REQUESTS
        assert by_url(aggregate.endpoints) == {
            dead.base_url: (TRIAL_REQUESTS, TRIAL_REQUESTS, 0),
            healthy.base_url: (N, 0, 0),
        }
        reported = {e.base_url: e for e in aggregate.endpoints}[dead.base_url]
        assert (reported.breaker_half_opened, reported.breaker_opened) == (1, 1)

        # Round 3, after the cooldown: trials again, which fail; every agent still answers.
        clock.now += COOLDOWN_S
        chunks, aggregate = await play(subenv, round_spec(round_request(both, 3), client))
        assert aggregate.count == N and aggregate.llm_errors == 0
        assert dead.requests == FAILURE_THRESHOLD + 2 * TRIAL_REQUESTS
        assert by_url(aggregate.endpoints) == {
            dead.base_url: (TRIAL_REQUESTS, TRIAL_REQUESTS, 0),
            healthy.base_url: (N, 0, 0),
        }

        # Round 4 asks only the dead endpoint (its breaker is the process's, open for longer
        # now): the round's trials fail, then every other request fails fast as skipped (and
        # so do the trials' retries); every agent is an llm_error.
        alone = llm_message(
            endpoints=[pb.LlmEndpoint(base_url=dead.base_url, model=MODEL)], max_retries=2
        )
        chunks, aggregate = await play(subenv, round_spec(round_request(alone, 4), client))
        assert aggregate.count == 0 and aggregate.n_invalid == aggregate.llm_errors == N
        assert dead.requests == FAILURE_THRESHOLD + 3 * TRIAL_REQUESTS
        (skipped,) = aggregate.endpoints
        assert (skipped.requests, skipped.errors, skipped.skipped) == (
            TRIAL_REQUESTS,
            TRIAL_REQUESTS,
            N,
        )
        assert skipped.last_error.startswith(f"HTTP 500 from {dead.base_url}"), "the reason"


async def test_a_whole_cohort_decision_sums_its_parts_usage(clocked):
    _, client = clocked
    with (
        OpenAIServer(model=MODEL, answer=by_agent) as healthy,
        OpenAIServer(model=MODEL, fault=lambda request: "500") as dead,
    ):
        store = make_store(30)
        llm = llm_message(
            endpoints=[
                pb.LlmEndpoint(base_url=dead.base_url, model=MODEL, max_concurrency=1),
                pb.LlmEndpoint(base_url=healthy.base_url, model=MODEL, max_concurrency=2),
            ],
            max_retries=1,
        )
        policy = round_spec(round_request(llm, 1), client).policy
        rule = GameRule(ratio=2 / 3, offset=0.0, min=0.0, max=100.0)
        result = await policy.decide(
            Cohort(store.population("p"), np.arange(30)), RoundContext(1, 7, rule, None)
        )
        sent_to_dead = dead.requests
    assert np.isfinite(result.values).all()
    # The parts' usage adds up to what each server saw. How many requests the dead endpoint got
    # before its breaker opened depends on how fast the healthy one answered the rest.
    assert 1 <= sent_to_dead <= FAILURE_THRESHOLD
    assert by_url(result.endpoints) == {
        dead.base_url: (sent_to_dead, sent_to_dead, 0),
        healthy.base_url: (30, 0, 0),
    }


def test_the_aggregator_adds_usage_per_endpoint():
    aggregator = Aggregator(0.0, 100.0, 101)
    aggregator.add_endpoints([EndpointUsage("http://b", "m", requests=3, errors=1, last_error="x")])
    aggregator.add_endpoints([EndpointUsage("http://a", "m", skipped=2)])
    aggregator.add_endpoints([EndpointUsage("http://b", "m", requests=2, errors=2, last_error="y")])
    aggregator.add_endpoints([])
    result = aggregator.result(0.1)
    assert result.endpoints == [
        EndpointUsage("http://a", "m", skipped=2),
        EndpointUsage("http://b", "m", requests=5, errors=3, last_error="y"),
    ]
    assert Aggregator(0.0, 100.0, 101).result(0.0).endpoints == []
    assert not aggregate_message(Aggregator(0.0, 1.0, 1).result(0.0)).aggregate.endpoints
