"""Is an LLM endpoint dead? Read from the workers' per-endpoint usage in one round."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from worker_server.rpc import worker_pb2 as pb


@dataclass
class _Totals:
    requests: int = 0  # sent, retries included
    errors: int = 0  # of those, failed
    skipped: int = 0  # not sent: the circuit breaker was open
    opened: int = 0  # times a worker process's breaker opened
    last_error: str = ""


def endpoint_failure(
    partials: Iterable[pb.PartialAggregate], ratio: float, min_requests: int
) -> str | None:
    """Why the round cannot be kept, when an endpoint failed more than `ratio` of at least
    `min_requests` requests (skipped ones, refused by an open circuit breaker, weigh as failed
    ones here: their agents got no answer) and that cost the round at least `min_requests`
    answers; None otherwise. The reason tells failed and skipped requests apart. A dead
    endpoint whose agents were answered by a healthy one (the workers' circuit breakers route
    around it) does not stop the run."""
    partials = list(partials)
    if sum(p.llm_errors for p in partials) < min_requests:
        return None
    totals: dict[tuple[str, str], _Totals] = {}
    for partial in partials:
        for usage in partial.endpoints:
            total = totals.setdefault((usage.base_url, usage.model), _Totals())
            total.requests += usage.requests
            total.errors += usage.errors
            total.skipped += usage.skipped
            total.opened += usage.breaker_opened
            total.last_error = usage.last_error or total.last_error
    for (base_url, model), total in sorted(totals.items()):
        asked = total.requests + total.skipped
        if asked >= min_requests and total.errors + total.skipped > ratio * asked:
            return (
                f"LLM endpoint {base_url} (model {model!r}) {_what_happened(total)}; the round "
                "is not kept. Fix the endpoint and resume"
            )
    return None


def _what_happened(total: _Totals) -> str:
    said = f"failed {total.errors} of {total.requests} requests sent"
    if total.skipped:
        said += (
            f", and {total.skipped} more were skipped, not sent, because its circuit breaker "
            "was open"
        )
        if total.opened:
            said += f" (it opened {_times(total.opened)} in this round)"
    if total.last_error:
        said += f"; last error: {total.last_error}"
    return said


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"
