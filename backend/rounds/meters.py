"""The LLM meters: per endpoint, what a round (or a run) asked of it and what it cost.

Workers count per (base_url, model) — requests, errors, skips (never sent: the circuit was
open; not counted as errors), late cuts, tokens, circuit breaker changes, and answered
latencies in fixed buckets (worker_server.llm.usage) — so the manager adds the counts of every
process, attempt and round, and reads percentiles from the summed buckets. Nothing here is per
agent. A meter as stored in `rounds.endpoints` and served by the API is a plain dict: the raw
counts (so runs can be summed later) and the figures derived from them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from worker_server.llm.usage import (
    EndpointUsage,
    UsageTally,
    latency_quantile,
    usage_from_message,
)
from worker_server.rpc import worker_pb2 as pb

# (base_url, model) -> (USD per million prompt tokens, per million completion tokens)
Prices = Mapping[tuple[str, str], tuple[float, float]]


def summed(messages: Iterable[pb.EndpointUsage]) -> list[EndpointUsage]:
    """Per endpoint, the counts of every message added up, in (base_url, model) order."""
    tally = UsageTally()
    tally.add(usage_from_message(m) for m in messages)
    return tally.take()


def meter(usage: EndpointUsage, duration_s: float, prices: Prices) -> dict[str, Any]:
    """One endpoint's meter: counts, latency p50/p95, requests per second over `duration_s`,
    and the estimated cost (None without a price for the endpoint)."""
    price = prices.get((usage.base_url, usage.model))
    cost = None
    if price is not None:
        cost = (usage.prompt_tokens * price[0] + usage.completion_tokens * price[1]) / 1e6
    return {
        "base_url": usage.base_url,
        "model": usage.model,
        "requests": usage.requests,
        "errors": usage.errors,
        "skipped": usage.skipped,
        "late": usage.late,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "cached_tokens": usage.cached_tokens,
        "latency_p50_s": latency_quantile(usage.latency_counts, 0.5),
        "latency_p95_s": latency_quantile(usage.latency_counts, 0.95),
        "latency_mean_s": (
            usage.latency_sum_s / sum(usage.latency_counts) if usage.latency_counts else None
        ),
        "requests_per_s": usage.requests / duration_s if duration_s > 0 else None,
        "cost_usd": cost,
        "last_error": usage.last_error,
        # Raw, so a run's meters are the sum of its rounds'.
        # How often the endpoint's circuit breakers (one per worker process) changed state.
        "breaker_opened": usage.breaker_opened,
        "breaker_half_opened": usage.breaker_half_opened,
        "breaker_closed": usage.breaker_closed,
        "latency_counts": usage.latency_counts,
        "latency_sum_s": usage.latency_sum_s,
        "duration_s": duration_s,
    }


def round_meters(
    messages: Iterable[pb.EndpointUsage], duration_s: float, prices: Prices
) -> list[dict[str, Any]]:
    return [meter(u, duration_s, prices) for u in summed(messages)]


def usage_of_meter(stored: Mapping[str, Any]) -> EndpointUsage:
    """The raw counts of a stored (or published) meter; backend.metrics adds each round's."""
    return EndpointUsage(
        base_url=stored["base_url"],
        model=stored["model"],
        requests=stored.get("requests", 0),
        errors=stored.get("errors", 0),
        skipped=stored.get("skipped", 0),
        last_error=stored.get("last_error", ""),
        prompt_tokens=stored.get("prompt_tokens", 0),
        completion_tokens=stored.get("completion_tokens", 0),
        cached_tokens=stored.get("cached_tokens", 0),
        late=stored.get("late", 0),
        latency_counts=list(stored.get("latency_counts") or []),
        latency_sum_s=stored.get("latency_sum_s", 0.0),
        breaker_opened=stored.get("breaker_opened", 0),
        breaker_half_opened=stored.get("breaker_half_opened", 0),
        breaker_closed=stored.get("breaker_closed", 0),
    )


def run_meters(rounds: Iterable[list[Mapping[str, Any]]], prices: Prices) -> list[dict[str, Any]]:
    """A run's meters from its rounds' stored ones: counts added, requests per second over the
    time the rounds took (per endpoint: the rounds that used it)."""
    tally = UsageTally()
    durations: dict[tuple[str, str], float] = {}
    for endpoints in rounds:
        for stored in endpoints:
            usage = usage_of_meter(stored)
            tally.add([usage])
            durations[usage.key] = durations.get(usage.key, 0.0) + stored.get("duration_s", 0.0)
    return [meter(u, durations.get(u.key, 0.0), prices) for u in tally.take()]


def total_cost(meters: Iterable[Mapping[str, Any]]) -> float | None:
    """The sum of the meters' costs; None when no endpoint has a price."""
    costs = [m["cost_usd"] for m in meters if m.get("cost_usd") is not None]
    return sum(costs) if costs else None
