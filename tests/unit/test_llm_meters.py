"""The LLM meters: latency buckets and their percentiles, per-endpoint counts that add up across
processes and rounds, costs from prices, and a client that counts an answer in the tally it
finds when the answer comes (a part of the round may have taken the counts meanwhile)."""

from __future__ import annotations

import asyncio

import pytest

from backend.rounds.meters import meter, round_meters, run_meters, total_cost
from bench.openai_server import OpenAIServer
from tests.support import wait_until
from worker_server.llm import Generation, LlmClient
from worker_server.llm.spec import EndpointSpec
from worker_server.llm.usage import (
    LATENCY_BOUNDS_S,
    LATENCY_BUCKETS,
    EndpointUsage,
    UsageTally,
    latency_bucket,
    latency_quantile,
    usage_message,
)

MODEL = "meter-model"


def usage(url: str = "http://a", latencies=(), **counts) -> EndpointUsage:
    u = EndpointUsage(url, MODEL, **counts)
    for seconds in latencies:
        u.answered(seconds, 10, 2, 0)
    return u


def test_latency_buckets_cover_a_millisecond_to_minutes_and_read_back_within_a_bucket():
    assert latency_bucket(0.0) == 0 and latency_bucket(10_000.0) == LATENCY_BUCKETS - 1
    assert LATENCY_BOUNDS_S[0] == 0.001 and LATENCY_BOUNDS_S[-1] > 600
    counts = [0] * LATENCY_BUCKETS
    for seconds in [0.1] * 90 + [2.0] * 10:
        counts[latency_bucket(seconds)] += 1
    p50, p95 = latency_quantile(counts, 0.5), latency_quantile(counts, 0.95)
    assert 0.1 / 2**0.5 <= p50 <= 0.1 * 2**0.5
    assert 2.0 / 2**0.5 <= p95 <= 2.0 * 2**0.5
    assert latency_quantile([0] * LATENCY_BUCKETS, 0.5) is None


def test_usage_from_two_processes_adds_up_through_the_wire():
    a = usage("http://a", latencies=[0.05, 0.2], requests=3, errors=1, late=1)
    b = usage("http://a", latencies=[0.4], requests=1)
    c = usage("http://c", latencies=[1.0], requests=1)
    meters = round_meters(
        [usage_message(u) for u in (a, b, c)],
        duration_s=2.0,
        prices={("http://a", MODEL): (1.0, 10.0)},
    )
    first, second = meters
    assert (first["base_url"], first["requests"], first["errors"], first["late"]) == (
        "http://a",
        4,
        1,
        1,
    )
    assert (first["prompt_tokens"], first["completion_tokens"]) == (30, 6)
    assert sum(first["latency_counts"]) == 3 and first["requests_per_s"] == 2.0
    assert first["cost_usd"] == pytest.approx((30 * 1.0 + 6 * 10.0) / 1e6)
    assert second["base_url"] == "http://c" and second["cost_usd"] is None
    assert total_cost(meters) == first["cost_usd"]
    assert total_cost([second]) is None


def test_a_runs_meters_are_the_sum_of_its_rounds():
    one = meter(usage(latencies=[0.1] * 4, requests=4), 2.0, {})
    two = meter(usage(latencies=[0.3] * 6, requests=6, errors=2), 3.0, {})
    (run,) = run_meters([[one], [two]], {("http://a", MODEL): (2.0, 0.0)})
    assert (run["requests"], run["errors"], run["prompt_tokens"]) == (10, 2, 100)
    assert sum(run["latency_counts"]) == 10 and run["requests_per_s"] == pytest.approx(10 / 5.0)
    assert run["cost_usd"] == pytest.approx(100 * 2.0 / 1e6)
    assert run_meters([], {}) == []


async def test_an_answer_that_comes_after_a_take_is_counted_in_the_next_take():
    # A slow LLM (the fake server's behaviour): the take lands while the answer is on its way.
    with OpenAIServer(model=MODEL, latency_s=0.5) as server:
        client = LlmClient()
        route = client.routes(
            [EndpointSpec(base_url=server.base_url, model=MODEL, max_concurrency=4)]
        )[MODEL]
        tally = UsageTally()
        try:
            asking = asyncio.create_task(
                client.complete(
                    route,
                    Generation(api="completions", model=MODEL, user="agent 1", seed=1),
                    timeout_s=10,
                    max_retries=0,
                    usage=tally,
                )
            )
            # The server counts in its own thread: poll between the loop's turns.
            await wait_until(lambda: server.requests == 1, what="the request on the wire")
            (before,) = tally.take()
            completion = await asking
        finally:
            await client.aclose()
    (after,) = tally.take()
    assert before.requests == 1 and before.prompt_tokens == 0
    assert after.prompt_tokens == completion.prompt_tokens > 0
    assert sum(after.latency_counts) == 1 and after.latency_sum_s > 0
