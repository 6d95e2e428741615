"""When a round's LLM failures stop the run, and when a healthy endpoint carries it."""

from __future__ import annotations

from backend.simulations.llm_health import endpoint_failure
from worker_server.llm.breaker import CircuitBreaker
from worker_server.rpc import worker_pb2 as pb

DEAD = "http://dead:8000"
ALIVE = "http://alive:8000"


def _partial(llm_errors: int, *usage: tuple[str, int, int, int]) -> pb.PartialAggregate:
    return pb.PartialAggregate(
        llm_errors=llm_errors,
        endpoints=[
            pb.EndpointUsage(
                base_url=url,
                model="m",
                requests=asked,
                errors=failed,
                skipped=skipped,
                last_error="connection refused" if failed or skipped else "",
            )
            for url, asked, failed, skipped in usage
        ],
    )


def test_a_dead_endpoint_that_cost_the_round_its_answers_stops_it_and_says_why():
    why = endpoint_failure(
        [_partial(30, (DEAD, 20, 20, 0)), _partial(25, (DEAD, 5, 5, 20))], 0.5, 10
    )
    assert why is not None
    assert DEAD in why and "round is not kept" in why
    assert (
        "failed 25 of 25 requests sent, and 20 more were skipped, not sent, because its "
        "circuit breaker was open; last error: connection refused"
    ) in why


def test_skipped_requests_are_told_apart_from_failed_ones():
    partial = _partial(300, (DEAD, 5, 5, 295))
    partial.endpoints[0].breaker_opened = 2
    why = endpoint_failure([partial], 0.5, 10)
    assert why == (
        f"LLM endpoint {DEAD} (model 'm') failed 5 of 5 requests sent, and 295 more were "
        "skipped, not sent, because its circuit breaker was open (it opened 2 times in this "
        "round); last error: connection refused; the round is not kept. Fix the endpoint and "
        "resume"
    )
    assert "failed 300" not in why


def test_a_dead_endpoint_whose_agents_a_healthy_one_answered_does_not_stop_the_run():
    partials = [_partial(0, (DEAD, 5, 5, 0), (ALIVE, 500, 0, 0))]
    assert endpoint_failure(partials, 0.5, 10) is None


def test_a_few_failures_are_noise_and_half_is_not_more_than_half():
    assert endpoint_failure([_partial(3, (DEAD, 3, 3, 0))], 0.5, 10) is None
    assert endpoint_failure([_partial(20, (ALIVE, 40, 20, 0))], 0.5, 10) is None
    assert endpoint_failure([_partial(21, (ALIVE, 40, 21, 0))], 0.5, 10) is not None


def test_a_probe_that_answers_closes_an_open_breaker():
    breaker = CircuitBreaker(threshold=1, cooldown_s=30, max_cooldown_s=30)
    breaker.failed(breaker.send(0.0), 0.0, "down")
    assert not breaker.available(1.0)
    breaker.recovered()
    assert breaker.available(1.0)
