"""Is an LLM endpoint dead? Read from the workers' per-endpoint usage in one round."""

from __future__ import annotations

from collections.abc import Iterable

from worker_server.rpc import worker_pb2 as pb


def endpoint_failure(
    partials: Iterable[pb.PartialAggregate], ratio: float, min_requests: int
) -> str | None:
    """Why the round cannot be kept, when an endpoint failed more than `ratio` of at least
    `min_requests` requests (skipped ones, refused by an open circuit breaker, count as
    failed) and that cost the round at least `min_requests` answers; None otherwise. A dead
    endpoint whose agents were answered by a healthy one (the workers' circuit breakers route
    around it) does not stop the run."""
    partials = list(partials)
    if sum(p.llm_errors for p in partials) < min_requests:
        return None
    totals: dict[tuple[str, str], list] = {}
    for partial in partials:
        for usage in partial.endpoints:
            total = totals.setdefault((usage.base_url, usage.model), [0, 0, ""])
            total[0] += usage.requests + usage.skipped
            total[1] += usage.errors + usage.skipped
            total[2] = usage.last_error or total[2]
    for (base_url, model), (asked, failed, last_error) in sorted(totals.items()):
        if asked >= min_requests and failed > ratio * asked:
            why = f": {last_error}" if last_error else ""
            return (
                f"LLM endpoint {base_url} (model {model!r}) failed {failed} of {asked} "
                f"requests{why}; the round is not kept. Fix the endpoint and resume"
            )
    return None
