"""Circuit breakers per LLM endpoint: the state machine on its own (time passed in by hand), then
the client's routing around open endpoints against real OpenAI-compatible servers over real
HTTP (in-process bench.openai_server) and a closed port, with the breakers' clock stepped by hand;
and the per-endpoint usage the client counts."""

from __future__ import annotations

import asyncio

import pytest

from bench.openai_server import OpenAIServer, rate_fault
from tests.support import free_port, wait_for
from worker_server.llm import (
    CircuitOpen,
    EndpointUsage,
    Generation,
    LlmClient,
    LlmFailure,
    LlmTimeout,
    UsageTally,
)
from worker_server.llm.breaker import (
    CLOSED,
    COOLDOWN_S,
    FAILURE_THRESHOLD,
    HALF_OPEN,
    MAX_COOLDOWN_S,
    OPEN,
    TRIAL_REQUESTS,
    CircuitBreaker,
)
from worker_server.llm.spec import EndpointSpec
from worker_server.llm.usage import MAX_ERROR_CHARS, short_error

MODEL = "test-model"


class Clock:
    """The breakers' time, stepped by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def fail_in_turn(breaker: CircuitBreaker, now: float, times: int) -> None:
    """Failures one after another, each request sent after the previous one failed."""
    for _ in range(times):
        breaker.failed(breaker.send(now), now, "HTTP 500")


# -- the state machine -----------------------------------------------------------------------


def test_opens_after_the_threshold_of_consecutive_failures():
    breaker = CircuitBreaker()
    fail_in_turn(breaker, 0.0, FAILURE_THRESHOLD - 1)
    assert breaker.state == CLOSED and breaker.available(0.0)
    fail_in_turn(breaker, 0.0, 1)
    assert breaker.state == OPEN
    assert not breaker.available(0.0)
    assert not breaker.available(COOLDOWN_S - 0.001)
    assert breaker.available(COOLDOWN_S)
    assert breaker.last_error == "HTTP 500"


def test_an_answer_resets_the_count():
    breaker = CircuitBreaker()
    fail_in_turn(breaker, 0.0, FAILURE_THRESHOLD - 1)
    breaker.answered(breaker.send(0.0))
    fail_in_turn(breaker, 0.0, FAILURE_THRESHOLD - 1)
    assert breaker.state == CLOSED
    fail_in_turn(breaker, 0.0, 1)
    assert breaker.state == OPEN


def test_requests_in_flight_together_fail_as_one():
    breaker = CircuitBreaker()
    burst = [breaker.send(0.0) for _ in range(50)]  # all sent before any failed
    for ticket in burst:
        breaker.failed(ticket, 0.0, "HTTP 503")
    assert breaker.state == CLOSED and breaker.failures == 1
    # Their retries, sent after the burst was seen, are the next wave.
    fail_in_turn(breaker, 0.0, FAILURE_THRESHOLD - 1)
    assert breaker.state == OPEN


def fail_trials(breaker: CircuitBreaker, now: float) -> None:
    """Every trial of a half-open stint, sent together, fails."""
    trials = [breaker.send(now) for _ in range(TRIAL_REQUESTS)]
    assert all(t.trial for t in trials)
    for trial in trials:
        breaker.failed(trial, now, "connection refused")


def test_half_open_lets_a_few_trials_through_and_an_answer_closes_it():
    breaker = CircuitBreaker()
    fail_in_turn(breaker, 0.0, FAILURE_THRESHOLD)
    trials = [breaker.send(COOLDOWN_S) for _ in range(TRIAL_REQUESTS)]
    assert all(t.trial for t in trials) and breaker.state == HALF_OPEN
    assert not breaker.available(COOLDOWN_S + 100), "no more than TRIAL_REQUESTS at a time"
    assert breaker.deciding
    breaker.failed(trials[0], COOLDOWN_S, "HTTP 500")
    assert breaker.state == HALF_OPEN, "one failed trial is one unlucky request"
    trial = trials[1]
    breaker.answered(trial)
    assert not breaker.deciding
    assert breaker.state == CLOSED and breaker.available(COOLDOWN_S)
    assert not breaker.send(COOLDOWN_S).trial
    # Closed again, with the cooldown back at its start.
    fail_in_turn(breaker, 10.0, FAILURE_THRESHOLD)
    assert breaker.cooldown_s == COOLDOWN_S and breaker.available(10.0 + COOLDOWN_S)


def test_a_failed_trial_doubles_the_cooldown_up_to_the_maximum():
    breaker = CircuitBreaker()
    now = 0.0
    fail_in_turn(breaker, now, FAILURE_THRESHOLD)
    cooldowns = []
    for _ in range(8):
        cooldowns.append(breaker.opens_until - now)
        now = breaker.opens_until
        assert breaker.available(now) and not breaker.available(now - 0.001)
        fail_trials(breaker, now)
        assert breaker.state == OPEN
    assert cooldowns == [2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0, 30.0]
    assert COOLDOWN_S == 2.0 and MAX_COOLDOWN_S == 30.0


def test_an_abandoned_trial_lets_the_next_request_try():
    breaker = CircuitBreaker()
    fail_in_turn(breaker, 0.0, FAILURE_THRESHOLD)
    trials = [breaker.send(COOLDOWN_S) for _ in range(TRIAL_REQUESTS)]
    breaker.abandoned(trials[0])
    assert breaker.state == HALF_OPEN and breaker.available(COOLDOWN_S)
    assert breaker.send(COOLDOWN_S).trial


def test_a_retried_request_counts_once_so_one_failing_prompt_never_opens_it():
    """An endpoint that fails one prompt every time: the prompt's first failure counts, its
    retries do not (a request counts once), and answers to other prompts reset the count."""
    breaker = CircuitBreaker()
    for _ in range(10 * FAILURE_THRESHOLD):
        breaker.failed(breaker.send(0.0, retry=True), 0.0, "HTTP 500")
    assert breaker.state == CLOSED and breaker.failures == 0
    assert breaker.last_error == "HTTP 500", "the reason stays current"
    # The tail of a round: a few failing prompts' first tries, then only their retries.
    fail_in_turn(breaker, 0.0, FAILURE_THRESHOLD - 1)
    for _ in range(100):
        breaker.failed(breaker.send(0.0, retry=True), 0.0, "HTTP 500")
    assert breaker.state == CLOSED
    # A dead endpoint fails new requests too: it opens.
    fail_in_turn(breaker, 0.0, 1)
    assert breaker.state == OPEN


def test_a_retry_is_never_a_trial():
    breaker = CircuitBreaker()
    fail_in_turn(breaker, 0.0, FAILURE_THRESHOLD)
    assert not breaker.available(COOLDOWN_S, retry=True)
    assert breaker.available(COOLDOWN_S)
    trial = breaker.send(COOLDOWN_S)
    assert breaker.state == HALF_OPEN and not breaker.available(COOLDOWN_S, retry=True)
    breaker.answered(trial)
    assert breaker.available(COOLDOWN_S, retry=True), "closed: retries go again"


def test_a_new_round_half_opens_an_open_breaker_once():
    changes = []
    breaker = CircuitBreaker(on_change=lambda old, new, why: changes.append((old, new, why)))
    assert not breaker.begin_round(("sim", 1)), "closed: nothing to do"
    fail_in_turn(breaker, 0.0, FAILURE_THRESHOLD)
    assert not breaker.available(0.0)
    assert breaker.begin_round(("sim", 2))
    assert breaker.state == HALF_OPEN and breaker.available(0.0), "no cooldown to wait out"
    fail_trials(breaker, 0.0)
    assert breaker.state == OPEN
    assert not breaker.begin_round(("sim", 2)), "once per round"
    assert not breaker.available(0.0)
    assert breaker.begin_round(("sim", 3))
    breaker.answered(breaker.send(0.0))
    assert [(old, new) for old, new, _ in changes] == [
        (CLOSED, OPEN),
        (OPEN, HALF_OPEN),
        (HALF_OPEN, OPEN),
        (OPEN, HALF_OPEN),
        (HALF_OPEN, CLOSED),
    ]
    assert changes[0][2] == (
        f"{FAILURE_THRESHOLD} requests failed in a row; no requests for {COOLDOWN_S:g} s: HTTP 500"
    )
    assert changes[1][2].startswith("a new round started")
    assert changes[2][2].startswith(f"{TRIAL_REQUESTS} trial requests failed")


def test_requests_sent_before_it_opened_do_not_move_it():
    breaker = CircuitBreaker()
    stragglers = [breaker.send(0.0) for _ in range(3)]
    fail_in_turn(breaker, 0.0, FAILURE_THRESHOLD)
    opened_until = breaker.opens_until
    breaker.failed(stragglers[0], 1.0, "late failure")
    assert breaker.state == OPEN and breaker.opens_until == opened_until
    assert breaker.last_error == "late failure", "the reason stays current"
    # But an answer, whenever it was asked, shows the endpoint alive.
    breaker.answered(stragglers[1])
    assert breaker.state == CLOSED


def test_bad_settings_are_refused():
    with pytest.raises(ValueError):
        CircuitBreaker(threshold=0)
    with pytest.raises(ValueError):
        CircuitBreaker(cooldown_s=10, max_cooldown_s=5)


# -- usage counters and error texts --------------------------------------------------------------


def test_usage_tallies_merge_and_are_taken_in_order():
    tally = UsageTally()
    tally.of("http://b", MODEL).requests += 2
    first = tally.of("http://a", MODEL)
    first.requests, first.errors, first.last_error = 3, 1, "HTTP 500"
    merged = UsageTally()
    merged.add(tally.take())
    merged.add([EndpointUsage("http://a", MODEL, requests=1, skipped=4)])
    assert len(tally) == 0
    assert merged.snapshot() == [
        EndpointUsage("http://a", MODEL, requests=4, errors=1, skipped=4, last_error="HTTP 500"),
        EndpointUsage("http://b", MODEL, requests=2),
    ]


def test_error_texts_are_short_single_lines_without_credentials():
    key = "sk-live-0123456789abcdef"
    text = short_error(
        f"HTTP 401 from http://user:pw@llm:8000/v1/chat/completions: bad key {key}\n"
        "Authorization: Bearer abcdefgh12345678 rejected",
        secret=key,
    )
    assert key not in text and "pw@" not in text and "abcdefgh12345678" not in text
    assert "\n" not in text and text.startswith("HTTP 401 from http://llm:8000/")
    assert short_error("Incorrect API key provided: sk-proj-AbCdEf123456").endswith("sk-***")
    long = short_error("x" * 5000)
    assert len(long) == MAX_ERROR_CHARS


# -- the client routes around open endpoints (real HTTP) ---------------------------------------


def spec(server_or_url, cap: int = 16, model: str = MODEL) -> EndpointSpec:
    url = server_or_url if isinstance(server_or_url, str) else server_or_url.base_url
    return EndpointSpec(base_url=url, model=model, max_concurrency=cap)


def ask(i: int) -> Generation:
    return Generation(api="completions", model=MODEL, user=f"agent {i}", seed=i)


async def many(
    client: LlmClient, route, n: int, *, return_exceptions: bool = False, **options
) -> list:
    """n requests at once."""
    calls = (client.complete(route, ask(i), timeout_s=30, **options) for i in range(n))
    return await asyncio.gather(*calls, return_exceptions=return_exceptions)


@pytest.fixture
async def clock_client():
    clock = Clock()
    client = LlmClient(backoff_base_s=0.001, clock=clock)
    yield clock, client
    await client.aclose()


async def test_a_failing_endpoint_gets_no_requests_once_open_and_the_other_answers(clock_client):
    clock, client = clock_client
    with (
        OpenAIServer(model=MODEL) as healthy,
        OpenAIServer(model=MODEL, fault=lambda request: "500") as failing,
    ):
        # The failing endpoint takes one request at a time: each failure is seen before the
        # next request goes, so it opens after exactly FAILURE_THRESHOLD of them.
        route = client.routes([spec(failing, cap=1), spec(healthy, cap=4)])[MODEL]
        usage = UsageTally()
        completions = await many(client, route, 60, max_retries=2, usage=usage)
        assert all(c.text.isdigit() for c in completions), "every request answered"
        assert failing.requests == FAILURE_THRESHOLD, "no request once open (clock stood still)"
        assert route.lanes[0].breaker.state == OPEN
        counted = {u.base_url: u for u in usage.take()}
        dead = counted[failing.base_url]
        assert (dead.requests, dead.errors, dead.skipped) == (FAILURE_THRESHOLD,) * 2 + (0,)
        assert dead.last_error.startswith(f"HTTP 500 from {failing.base_url}/v1/completions")
        alive = counted[healthy.base_url]
        assert alive.requests == healthy.requests == 60 and alive.errors == 0
        assert all(e.in_flight == 0 and not e.waiters for e in route.endpoints)

        # While it stays open, nothing goes its way.
        await many(client, route, 20, max_retries=0)
        assert failing.requests == FAILURE_THRESHOLD and healthy.requests == 80
        # After the cooldown, a few trials; they fail and their agents are answered by the
        # other one.
        clock.now += COOLDOWN_S
        await many(client, route, 20, max_retries=1)
        assert failing.requests == FAILURE_THRESHOLD + TRIAL_REQUESTS
        assert healthy.requests == 100
        assert route.lanes[0].breaker.state == OPEN


async def test_with_every_endpoint_open_requests_fail_fast_as_skipped(clock_client):
    clock, client = clock_client
    url = f"http://127.0.0.1:{free_port()}"
    route = client.routes([spec(url)])[MODEL]
    breaker = route.lanes[0].breaker
    usage = UsageTally()
    for i in range(FAILURE_THRESHOLD):
        with pytest.raises(LlmFailure, match="connection refused"):
            await client.complete(route, ask(i), timeout_s=10, max_retries=0, usage=usage)
    assert breaker.state == OPEN
    with pytest.raises(CircuitOpen, match=f"'{MODEL}' is failing.*connection refused to {url}"):
        await client.complete(route, ask(9), timeout_s=10, max_retries=3, usage=usage)
    (counted,) = usage.take()
    assert (counted.requests, counted.errors, counted.skipped) == (FAILURE_THRESHOLD,) * 2 + (1,)
    assert counted.last_error == f"connection refused to {url}"

    # A new tally (the next round) that only skips still says why.
    clock.now += COOLDOWN_S - 0.001
    with pytest.raises(CircuitOpen):
        await client.complete(route, ask(10), timeout_s=10, max_retries=0, usage=usage)
    (counted,) = usage.take()
    assert (counted.requests, counted.skipped) == (0, 1)
    assert counted.last_error == f"connection refused to {url}"

    # Past the cooldown: of five requests at once, TRIAL_REQUESTS are trials, the others wait
    # for them; the trials fail, so the others are skipped.
    clock.now += 0.001
    outcomes = await many(client, route, 5, max_retries=0, usage=usage, return_exceptions=True)
    kinds = sorted(type(o).__name__ for o in outcomes)
    assert kinds == ["CircuitOpen"] * (5 - TRIAL_REQUESTS) + ["LlmFailure"] * TRIAL_REQUESTS
    (counted,) = usage.take()
    assert (counted.requests, counted.errors, counted.skipped) == (3, 3, 2)
    assert (counted.breaker_half_opened, counted.breaker_opened) == (1, 1)
    # The failed trial doubled the cooldown.
    assert breaker.state == OPEN and breaker.opens_until == clock.now + 2 * COOLDOWN_S


async def test_an_endpoint_back_from_the_dead_is_used_again_after_its_trial(clock_client):
    clock, client = clock_client
    with OpenAIServer(model=MODEL, fault=lambda request: "500") as server:
        route = client.routes([spec(server)])[MODEL]
        breaker = route.lanes[0].breaker
        for i in range(FAILURE_THRESHOLD):
            with pytest.raises(LlmFailure):
                await client.complete(route, ask(i), timeout_s=10, max_retries=0)
        server.behaviour.fault = None  # restarted
        with pytest.raises(CircuitOpen):
            await client.complete(route, ask(0), timeout_s=10, max_retries=0)
        assert server.requests == FAILURE_THRESHOLD
        clock.now += COOLDOWN_S
        await client.complete(route, ask(0), timeout_s=10, max_retries=0)
        assert breaker.state == CLOSED and breaker.cooldown_s == COOLDOWN_S
        await many(client, route, 30, max_retries=0)
        assert server.requests == FAILURE_THRESHOLD + 31


async def test_a_cancelled_trial_lets_the_next_request_try(clock_client):
    clock, client = clock_client
    with OpenAIServer(model=MODEL, fault=lambda request: "500") as server:
        route = client.routes([spec(server)])[MODEL]
        breaker = route.lanes[0].breaker
        for i in range(FAILURE_THRESHOLD):
            with pytest.raises(LlmFailure):
                await client.complete(route, ask(i), timeout_s=10, max_retries=0)
        server.behaviour.fault = lambda request: "hang"
        clock.now += COOLDOWN_S
        trial = asyncio.create_task(client.complete(route, ask(1), timeout_s=60, max_retries=0))
        await asyncio.to_thread(wait_for, lambda: server.in_flight == 1, 5, 0.01, "the trial")
        assert breaker.state == HALF_OPEN and breaker.trials_in_flight == 1
        trial.cancel()  # CancelRound: not the endpoint's fault
        with pytest.raises(asyncio.CancelledError):
            await trial
        assert breaker.state == HALF_OPEN and breaker.trials_in_flight == 0
        assert breaker.trial_failures == 0 and breaker.available(clock.now)
        server.behaviour.fault = None
        await client.complete(route, ask(2), timeout_s=10, max_retries=0)
        assert breaker.state == CLOSED


async def test_a_client_error_is_an_answer_not_a_failure(clock_client):
    _, client = clock_client
    with OpenAIServer(model=MODEL) as server:
        route = client.routes([spec(server, model="no-such-model")])["no-such-model"]
        usage = UsageTally()
        for _ in range(2 * FAILURE_THRESHOLD):
            with pytest.raises(LlmFailure, match="HTTP 404"):
                await client.complete(
                    route,
                    Generation(api="chat", model="no-such-model", user="x"),
                    timeout_s=10,
                    max_retries=3,
                    usage=usage,
                )
        assert route.lanes[0].breaker.state == CLOSED
        assert server.requests == 2 * FAILURE_THRESHOLD
        (counted,) = usage.take()
        assert counted.requests == counted.errors == 2 * FAILURE_THRESHOLD


async def test_rate_limiting_is_retried_and_counted_but_does_not_open_the_circuit(clock_client):
    _, client = clock_client
    with OpenAIServer(model=MODEL, fault=lambda request: "429") as server:
        route = client.routes([spec(server)])[MODEL]
        usage = UsageTally()
        for i in range(2 * FAILURE_THRESHOLD):
            with pytest.raises(LlmFailure, match="HTTP 429"):
                await client.complete(route, ask(i), timeout_s=10, max_retries=1, usage=usage)
        assert route.lanes[0].breaker.state == CLOSED
        assert server.requests == 4 * FAILURE_THRESHOLD, "a try and a retry each"
        (counted,) = usage.take()
        assert counted.requests == counted.errors == 4 * FAILURE_THRESHOLD
        assert counted.last_error.startswith(f"HTTP 429 from {server.base_url}")


async def test_an_attempt_cut_by_the_deadline_is_a_failed_attempt(clock_client):
    _, client = clock_client
    with OpenAIServer(model=MODEL, fault=lambda request: "hang") as server:
        route = client.routes([spec(server)])[MODEL]
        usage = UsageTally()
        with pytest.raises(LlmTimeout) as err:
            await client.complete(route, ask(1), timeout_s=0.2, max_retries=3, usage=usage)
        assert err.value.failed_attempts == 0, "late, not an llm_error"
        (counted,) = usage.take()
        assert (counted.requests, counted.errors) == (1, 1)
        assert counted.last_error == f"no answer from {server.base_url} within the agent's 0.2 s"
        assert route.lanes[0].breaker.failures == 1


async def test_breakers_belong_to_the_process_not_the_round(clock_client):
    _, client = clock_client
    url = f"http://127.0.0.1:{free_port()}"
    first = client.routes([spec(url)])[MODEL]
    # Another round's route (another cap: another connection pool) shares the breaker.
    second = client.routes([spec(url, cap=3)])[MODEL]
    assert first.lanes[0].endpoint is not second.lanes[0].endpoint
    assert first.lanes[0].breaker is second.lanes[0].breaker
    assert client.routes([spec(url, model="other")])["other"].lanes[0].breaker is not (
        first.lanes[0].breaker
    ), "one breaker per (base_url, model)"


async def test_an_endpoint_failing_a_tenth_of_prompts_every_time_stays_closed():
    """Deterministic per prompt: a failing prompt's retries fail too and bunch up at the end
    (the other requests are answered by then, with the default backoff). They must not open
    the circuit."""
    n = 400
    client = LlmClient(clock=Clock())  # the default backoff: the retries come at the end
    with OpenAIServer(model=MODEL, fault=rate_fault(fail_rate=0.1)) as server:
        route = client.routes([spec(server, cap=32)])[MODEL]
        usage = UsageTally()
        outcomes = await many(client, route, n, max_retries=2, usage=usage, return_exceptions=True)
        failed = [o for o in outcomes if isinstance(o, Exception)]
        assert all(type(o) is LlmFailure for o in failed), "none skipped"
        assert 0.05 * n < len(failed) < 0.15 * n
        (counted,) = usage.take()
        assert counted.skipped == 0 and counted.breaker_opened == 0
        assert counted.errors == 3 * len(failed), "a try and two retries each"
        assert route.lanes[0].breaker.state == CLOSED
    await client.aclose()


async def test_a_new_round_tries_an_open_endpoint_at_once_and_waits_for_its_trials(clock_client):
    clock, client = clock_client
    with OpenAIServer(model=MODEL, fault=lambda request: "500") as server:
        route = client.routes([spec(server, cap=4)])[MODEL]
        breaker = route.lanes[0].breaker
        for i in range(FAILURE_THRESHOLD):
            with pytest.raises(LlmFailure):
                await client.complete(route, ask(i), timeout_s=10, max_retries=0)
        server.behaviour.fault = None  # back, well within the cooldown (the clock stands)
        usage = UsageTally()
        client.begin_round([route], ("sim", 2), usage)
        assert breaker.state == HALF_OPEN
        # The round's first requests are the trials; the others wait for them, none skipped.
        completions = await many(client, route, 40, max_retries=0, usage=usage)
        assert len(completions) == 40 and breaker.state == CLOSED
        (counted,) = usage.take()
        assert (counted.requests, counted.errors, counted.skipped) == (40, 0, 0)
        assert (counted.breaker_half_opened, counted.breaker_closed) == (1, 1)
        assert server.requests == FAILURE_THRESHOLD + 40

        # Dead again: the next round's trials fail, then the waiting requests are skipped.
        server.behaviour.fault = lambda request: "500"
        for i in range(FAILURE_THRESHOLD):
            with pytest.raises(LlmFailure):
                await client.complete(route, ask(i), timeout_s=10, max_retries=0)
        client.begin_round([route], ("sim", 3), usage)
        outcomes = await many(client, route, 40, max_retries=2, usage=usage, return_exceptions=True)
        assert all(isinstance(o, LlmFailure) for o in outcomes)
        (counted,) = usage.take()
        assert counted.requests == TRIAL_REQUESTS, "only the trials were sent"
        assert counted.skipped == 40, "the rest, and the trials' retries, were skipped"
        assert (counted.breaker_half_opened, counted.breaker_opened) == (1, 1)
        assert breaker.state == OPEN
