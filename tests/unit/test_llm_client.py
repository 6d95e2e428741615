"""The worker's LLM client against real OpenAI-compatible servers over real HTTP (in-process
bench.openai_server): routing, caps, deadlines, retries, keep-alive."""

from __future__ import annotations

import asyncio

import pytest

from bench.openai_server import OpenAIServer
from tests.support import free_port, wait_for, wait_until
from worker_server.llm import Generation, LlmClient, LlmFailure, LlmTimeout
from worker_server.llm.spec import EndpointSpec
from worker_server.stats import LoadCounters

MODEL = "test-model"


def spec(server_or_url, cap: int = 16, model: str = MODEL) -> EndpointSpec:
    url = server_or_url if isinstance(server_or_url, str) else server_or_url.base_url
    return EndpointSpec(base_url=url, model=model, max_concurrency=cap)


def ask(i: int, api: str = "completions") -> Generation:
    return Generation(api=api, model=MODEL, user=f"agent {i}", seed=i)


@pytest.fixture
def server():
    with OpenAIServer(model=MODEL) as running:
        yield running


async def test_answers_with_usage_over_kept_alive_connections(server):
    client = LlmClient(backoff_base_s=0.01)
    route = client.routes([spec(server)])[MODEL]
    try:
        for i in range(20):
            completion = await client.complete(route, ask(i), timeout_s=10, max_retries=0)
            record = server.records[-1]
            assert completion.text == record.text and completion.text.isdigit()
            assert completion.prompt_tokens == record.prompt_tokens == 2
            assert completion.completion_tokens == 1
        chat = await client.complete(route, ask(99, "chat"), timeout_s=10, max_retries=0)
        assert chat.text == server.records[-1].text
    finally:
        await client.aclose()
    assert server.stats()["connections_opened"] == 1, "one connection, kept alive"


async def test_a_connection_the_server_dropped_while_idle_is_replaced(server):
    client = LlmClient()
    route = client.routes([spec(server)])[MODEL]
    try:
        await client.complete(route, ask(1), timeout_s=10, max_retries=0)
        server.drop_connections()
        # No retries allowed: the stale connection must be noticed, not counted as a failure.
        await client.complete(route, ask(2), timeout_s=10, max_retries=0)
    finally:
        await client.aclose()
    assert server.requests == 2
    assert server.stats()["connections_opened"] == 2


async def test_least_loaded_routing_spreads_and_each_cap_holds():
    with (
        OpenAIServer(model=MODEL, latency_s=0.05) as small,
        OpenAIServer(model=MODEL, latency_s=0.05) as large,
    ):
        client = LlmClient()
        route = client.routes([spec(small, cap=2), spec(large, cap=6)])[MODEL]
        assert route.capacity == 8
        try:
            answers = await asyncio.gather(
                *(client.complete(route, ask(i), timeout_s=30, max_retries=0) for i in range(80))
            )
        finally:
            await client.aclose()
        assert len(answers) == 80
        assert small.requests + large.requests == 80
        assert small.max_in_flight == 2 and large.max_in_flight == 6
        # Loads are compared relative to the caps: the larger endpoint takes the larger share.
        assert large.requests > small.requests > 0


async def test_the_deadline_starts_when_the_request_gets_a_slot(server):
    server.behaviour.latency_s = 0.3
    client = LlmClient()
    route = client.routes([spec(server, cap=1)])[MODEL]
    try:
        # The fifth waits 1.2 s behind the cap, more than its 1 s budget: it must still answer.
        await asyncio.gather(
            *(client.complete(route, ask(i), timeout_s=1.0, max_retries=0) for i in range(5))
        )
    finally:
        await client.aclose()
    assert server.max_in_flight == 1 and server.requests == 5


async def test_server_errors_are_retried_then_succeed(server):
    server.behaviour.fault = lambda request: "500" if request.attempt == 1 else None
    client = LlmClient(backoff_base_s=0.01)
    route = client.routes([spec(server)])[MODEL]
    try:
        completions = await asyncio.gather(
            *(client.complete(route, ask(i), timeout_s=10, max_retries=1) for i in range(10))
        )
    finally:
        await client.aclose()
    assert all(c.text.isdigit() for c in completions)
    assert server.stats()["by_status"] == {"500": 10, "200": 10}


@pytest.mark.parametrize("status", ["500", "429"])
async def test_errors_after_the_retries_fail_the_request(server, status):
    server.behaviour.fault = lambda request: status
    client = LlmClient(backoff_base_s=0.01)
    route = client.routes([spec(server)])[MODEL]
    try:
        with pytest.raises(LlmFailure, match=f"HTTP {status} from {server.base_url}"):
            await client.complete(route, ask(1), timeout_s=10, max_retries=2)
    finally:
        await client.aclose()
    assert server.requests == 3, "the first try and two retries"


async def test_a_client_error_is_not_retried(server):
    client = LlmClient(backoff_base_s=0.01)
    route = client.routes([spec(server, model="no-such-model")])["no-such-model"]
    try:
        with pytest.raises(LlmFailure, match="HTTP 404 .*does not exist"):
            await client.complete(
                route,
                Generation(api="chat", model="no-such-model", user="x"),
                timeout_s=10,
                max_retries=5,
            )
    finally:
        await client.aclose()
    assert server.requests == 1


async def test_a_hung_request_is_cut_at_the_deadline_and_the_server_sees_it_go(server):
    server.behaviour.fault = lambda request: "hang"
    load = LoadCounters()
    client = LlmClient(load)
    route = client.routes([spec(server)])[MODEL]
    try:
        calls = [
            asyncio.create_task(client.complete(route, ask(i), timeout_s=2.0, max_retries=3))
            for i in range(4)
        ]
        await asyncio.to_thread(wait_for, lambda: server.in_flight == 4, 5, 0.01, "4 in flight")
        assert load.inflight_llm_calls == 4, "heartbeats report the calls in flight"
        for call in calls:
            with pytest.raises(LlmTimeout) as err:
                await call
            assert err.value.failed_attempts == 0
        assert load.inflight_llm_calls == 0
        assert route.endpoints[0].in_flight == 0, "every slot was given back"
    finally:
        await client.aclose()
    # Polled without blocking the loop: the aborted sockets close on its next iterations.
    await asyncio.to_thread(wait_for, lambda: server.disconnected == 4, 10, 0.05, "hang-ups")
    assert server.in_flight == 0


async def test_retries_stay_inside_the_deadline(server):
    server.behaviour.fault = lambda request: "500"
    client = LlmClient(backoff_base_s=0.2)
    route = client.routes([spec(server)])[MODEL]
    try:
        with pytest.raises(LlmTimeout) as err:
            await client.complete(route, ask(1), timeout_s=0.5, max_retries=10)
    finally:
        await client.aclose()
    assert err.value.failed_attempts >= 1
    assert server.requests == err.value.failed_attempts < 11


async def test_unreachable_endpoint_fails_with_the_reason():
    url = f"http://127.0.0.1:{free_port()}"
    client = LlmClient(backoff_base_s=0.01)
    route = client.routes([spec(url)])[MODEL]
    try:
        with pytest.raises(LlmFailure, match=f"connection refused to {url}"):
            await client.complete(route, ask(1), timeout_s=5, max_retries=2)
    finally:
        await client.aclose()


async def test_cancelling_a_waiting_request_passes_its_turn_on(server):
    # A slow LLM (the fake server's behaviour): the first request holds the only slot while the
    # other two queue behind it.
    server.behaviour.latency_s = 0.5
    client = LlmClient()
    route = client.routes([spec(server, cap=1)])[MODEL]
    endpoint = route.endpoints[0]
    try:
        first = asyncio.create_task(client.complete(route, ask(1), timeout_s=5, max_retries=0))
        waiting = asyncio.create_task(client.complete(route, ask(2), timeout_s=5, max_retries=0))
        third = asyncio.create_task(client.complete(route, ask(3), timeout_s=5, max_retries=0))
        await wait_until(
            lambda: endpoint.in_flight == 1 and len(endpoint.waiters) == 2,
            what="one request in flight and two waiting",
        )
        waiting.cancel()
        await first
        await third
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert route.endpoints[0].in_flight == 0
    finally:
        await client.aclose()
    assert server.requests == 2
