"""A dead LLM endpoint among two, end to end: a real worker process, driven over real gRPC, calls
real OpenAI-compatible servers (bench.openai_server) and a closed port over real HTTP. The round
still gets its answers from the healthy endpoint, the dead one stops being asked once its circuit
is open, and the partial aggregate's `endpoints` say what each endpoint was asked and how it went.

The worker's breakers run on a stopped clock (frozen_breaker_clock/sitecustomize.py): an open
circuit stays open, so no half-open trial reaches an endpoint however long the test takes, and
the bounds below need no allowance for time. Trials and cooldowns are
tests/unit/test_llm_breaker.py's, on a clock stepped by hand."""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from pathlib import Path

import numpy as np
import pytest

from backend.workers.grpc_client import AgentColumns, WorkerClient
from bench.openai_server import OpenAIServer
from tests.support import descendants, free_port, stop_process, wait_for
from worker_server.llm.breaker import FAILURE_THRESHOLD, TRIAL_REQUESTS
from worker_server.rpc import worker_pb2 as pb

MODEL = "tiny-test-model"
RULE = pb.GameRule(ratio=2 / 3, offset=0, min=0, max=100)
USER = "You are {persona}. This is round {round}. Answer:"
AGENT = re.compile(r"agent-(\d+)")
FROZEN_CLOCK = Path(__file__).resolve().parent / "frozen_breaker_clock"


@pytest.fixture(scope="module")
def worker(shared_manager):
    """One real worker process whose LLM breakers' clock is stopped."""
    paths = [str(FROZEN_CLOCK), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {"PYTHONPATH": os.pathsep.join(paths), "POPULACE_TEST_FROZEN_BREAKER_CLOCK": "1"}
    proc = shared_manager.start_workers(procs=1, env=env)
    try:
        (online,) = wait_for(
            lambda: (
                [
                    w
                    for w in shared_manager.workers()
                    if w["state"] == "online" and w["pid"] in descendants(proc.pid)
                ]
                or None
            ),
            timeout=30,
            what="a worker online",
        )
        yield online["address"]
    finally:
        stop_process(proc)


def by_agent(request) -> str:
    return str(int(AGENT.search(request.prompt).group(1)) % 97)


async def deploy(client: WorkerClient, n: int) -> AgentColumns:
    ids = np.arange(1, n + 1, dtype=np.int64)
    population = AgentColumns(
        population_id=f"breaker-{uuid.uuid4().hex[:8]}",
        ids=ids,
        codes={},
        categories={},
        personas=[f"agent-{i}" for i in ids.tolist()],
    )
    await client.create_agents(population)
    return population


def policy(*endpoints: tuple[str, int]) -> pb.Policy:
    return pb.Policy(
        llm=pb.LlmPolicy(
            endpoints=[
                pb.LlmEndpoint(base_url=url, model=MODEL, max_concurrency=cap)
                for url, cap in endpoints
            ],
            default_model=MODEL,
            user_template=USER,
            api="chat",
            answer_mode="basic",
            request_timeout_s=20,
            max_retries=2,
        )
    )


async def play(
    client: WorkerClient, population: AgentColumns, llm: pb.Policy, number: int = 1
) -> tuple[dict[int, float], pb.PartialAggregate]:
    request = pb.RunRoundRequest(
        round_id=uuid.uuid4().hex,
        population_id=population.population_id,
        round=number,
        rule=RULE,
        policy=llm,
        seed=5,
        simulation_id="breaker",
    )
    decided: dict[int, float] = {}
    aggregate = None
    async for message in client.run_round(request, timeout=120):
        if message.WhichOneof("body") == "decisions":
            decided.update(zip(message.decisions.agent_ids, message.decisions.values, strict=True))
        else:
            aggregate = message.aggregate
    assert aggregate is not None
    return decided, aggregate


def usage_of(aggregate: pb.PartialAggregate) -> dict[str, pb.EndpointUsage]:
    assert all(e.model == MODEL for e in aggregate.endpoints)
    return {e.base_url: e for e in aggregate.endpoints}


async def test_a_failing_endpoint_is_routed_around_then_skipped(client):
    n = 200
    with (
        OpenAIServer(model=MODEL, answer=by_agent) as healthy,
        OpenAIServer(model=MODEL, fault=lambda request: "500") as failing,
    ):
        population = await deploy(client, n)
        # One request at a time to the failing endpoint: it opens after FAILURE_THRESHOLD.
        both = policy((failing.base_url, 1), (healthy.base_url, 4))
        decided, aggregate = await play(client, population, both)
        assert decided == {i: float(i % 97) for i in population.ids.tolist()}
        assert aggregate.count == n and aggregate.n_invalid == aggregate.llm_errors == 0
        usage = usage_of(aggregate)
        bad, good = usage[failing.base_url], usage[healthy.base_url]
        assert bad.requests == bad.errors == failing.requests, "every attempt counted, all failed"
        # One at a time, each failure counts: it opened after exactly FAILURE_THRESHOLD.
        assert bad.requests == FAILURE_THRESHOLD
        assert bad.skipped == 0, "the healthy endpoint took what the failing one could not"
        assert bad.last_error.startswith(f"HTTP 500 from {failing.base_url}/v1/chat/completions")
        assert good.requests == healthy.requests and good.errors == good.skipped == 0
        assert good.requests >= n

        assert (bad.breaker_opened, bad.breaker_half_opened, bad.breaker_closed) == (1, 0, 0)

        # The next round asks only the failing endpoint; its breaker (the process's, across
        # rounds) is open. The round's start half-opens it: its first requests are trials,
        # the others wait for them; the trials fail, so the others fail fast as skipped.
        before = failing.requests
        decided, aggregate = await play(client, population, policy((failing.base_url, 1)), number=2)
        assert decided == {} and aggregate.n_invalid == aggregate.llm_errors == n
        (bad,) = aggregate.endpoints
        assert bad.requests == bad.errors == failing.requests - before == TRIAL_REQUESTS
        assert bad.skipped == n, "every agent's request, the trials' retries included"
        assert (bad.breaker_opened, bad.breaker_half_opened, bad.breaker_closed) == (1, 1, 0)
        assert bad.last_error.startswith(f"HTTP 500 from {failing.base_url}")

        # Back from the dead: the next round's trials are answered, so no request is skipped
        # (a stopped clock: no cooldown would ever have let it be tried mid-round).
        failing.behaviour.fault = None
        failing.behaviour.answer = by_agent
        decided, aggregate = await play(client, population, policy((failing.base_url, 1)), number=3)
        assert decided == {i: float(i % 97) for i in population.ids.tolist()}
        (back,) = aggregate.endpoints
        assert (back.requests, back.errors, back.skipped) == (n, 0, 0)
        assert (back.breaker_opened, back.breaker_half_opened, back.breaker_closed) == (0, 1, 1)


async def test_a_closed_port_among_two_endpoints(client):
    n = 300
    dead_url = f"http://127.0.0.1:{free_port()}"
    cap = 4
    with OpenAIServer(model=MODEL, answer=by_agent) as healthy:
        population = await deploy(client, n)
        decided, aggregate = await play(
            client, population, policy((dead_url, cap), (healthy.base_url, cap))
        )
    assert decided == {i: float(i % 97) for i in population.ids.tolist()}
    assert aggregate.count == n and aggregate.llm_errors == 0
    usage = usage_of(aggregate)
    dead = usage[dead_url]
    assert dead.requests == dead.errors >= FAILURE_THRESHOLD
    # Requests in flight together fail as one: at most a cap's worth per failure counted.
    assert dead.requests <= cap * (FAILURE_THRESHOLD + 1) < n
    assert dead.last_error == f"connection refused to {dead_url}"
    assert usage[healthy.base_url].errors == 0


async def test_an_endpoint_stopped_mid_round(client):
    n = 400
    cap = 4
    with (
        OpenAIServer(model=MODEL, answer=by_agent, latency_s=0.01) as staying,
        OpenAIServer(model=MODEL, answer=by_agent, latency_s=0.01) as stopping,
    ):
        population = await deploy(client, n)
        both = policy((stopping.base_url, cap), (staying.base_url, cap))
        round_task = asyncio.create_task(play(client, population, both))
        await asyncio.to_thread(wait_for, lambda: stopping.requests >= 40, 30, 0.01, "requests")
        await asyncio.to_thread(stopping.stop)
        answered_before_stop = stopping.stats()["by_status"].get("200", 0)
        decided, aggregate = await round_task
    assert not round_task.cancelled()
    assert decided == {i: float(i % 97) for i in population.ids.tolist()}
    assert aggregate.count == n and aggregate.llm_errors == 0
    usage = usage_of(aggregate)
    stopped = usage[stopping.base_url]
    # Answers the worker got: at most `cap` requests were in flight when the server stopped, and
    # each of those may be counted on one side only (written but cut, or read before the
    # server's own count was taken).
    got = stopped.requests - stopped.errors
    assert answered_before_stop - cap <= got <= answered_before_stop + cap
    assert stopped.errors >= FAILURE_THRESHOLD, "it failed until its circuit opened"
    # The requests cut by the stop, then a cap's worth at most per failure counted.
    assert stopped.errors <= cap * (FAILURE_THRESHOLD + 2)
    assert stopped.skipped == 0 and stopped.last_error
    assert usage[staying.base_url].errors == 0
    assert usage[staying.base_url].requests == staying.requests
