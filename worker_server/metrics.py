"""Prometheus metrics of one worker process, served on a port of its own (`--metrics-port`).

Everything is counted per round or read when Prometheus scrapes, never per agent: a round adds
its partial aggregate (decisions, LLM usage per endpoint) once, as it ends; agents, capacity and
LLM calls in flight are read from the process's load counters at scrape time; CPU and RSS come
from prometheus_client's process collector.

`EndpointSeries` is shared with the manager (backend.metrics), which exports the same per
endpoint usage summed over every worker of a round.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from worker_server.llm.usage import (
    LATENCY_BOUNDS_S,
    EndpointUsage,
    UsageTally,
    without_credentials,
)

# Round durations: 10 ms to an hour.
ROUND_BUCKETS_S = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
ENDPOINT_LABELS = ("base_url", "model")


class EndpointSeries(Collector):
    """Per LLM endpoint (base_url, model): requests, errors, skipped, late, tokens by kind, and
    answered latencies as a histogram on the fixed buckets of worker_server.llm.usage (so the
    counts add up exactly, as they do between processes). Thread-safe: rounds add on the event
    loop, Prometheus's HTTP thread collects."""

    def __init__(self, prefix: str, scope: str) -> None:
        self.prefix = prefix
        self.scope = scope  # "this process" or "all workers": how far the counts reach
        self._tally = UsageTally()
        self._lock = threading.Lock()

    def add(self, usages: Iterable[EndpointUsage]) -> None:
        # Labels are read by any scraper: no user:password@ in them (one series per endpoint
        # whatever credentials its URL carried).
        public = [_public(u) for u in usages]
        with self._lock:
            self._tally.add(public)

    def describe(self) -> Iterator[Metric]:
        return self._families([])

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            usages = self._tally.snapshot()
        return self._families(usages)

    def _families(self, usages: list[EndpointUsage]) -> Iterator[Metric]:
        p, scope = self.prefix, self.scope
        counts = {
            "requests": "LLM requests sent (retries included)",
            "errors": "LLM attempts that got no usable completion (late ones included)",
            "skipped": "LLM requests not sent because the endpoint's circuit breaker was open",
            "late": "LLM attempts cut by the agents' deadline while on the wire",
        }
        for name, doc in counts.items():
            family = CounterMetricFamily(
                f"{p}_llm_{name}", f"{doc}, by {scope}.", labels=ENDPOINT_LABELS
            )
            for u in usages:
                family.add_metric(_labels(u), getattr(u, name))
            yield family
        tokens = CounterMetricFamily(
            f"{p}_llm_tokens",
            f"Tokens the LLM servers reported (kind: prompt, completion, cached prompt), by {scope}.",
            labels=(*ENDPOINT_LABELS, "kind"),
        )
        for u in usages:
            labels = _labels(u)
            tokens.add_metric([*labels, "prompt"], u.prompt_tokens)
            tokens.add_metric([*labels, "completion"], u.completion_tokens)
            tokens.add_metric([*labels, "cached"], u.cached_tokens)
        yield tokens
        latency = HistogramMetricFamily(
            f"{p}_llm_latency_seconds",
            f"Latency of answered LLM attempts, by {scope}.",
            labels=ENDPOINT_LABELS,
        )
        for u in usages:
            latency.add_metric(_labels(u), _buckets(u.latency_counts), u.latency_sum_s)
        yield latency


def _public(usage: EndpointUsage) -> EndpointUsage:
    copy = usage.copy()
    copy.base_url = without_credentials(usage.base_url)
    return copy


def _labels(usage: EndpointUsage) -> list[str]:
    return [usage.base_url, usage.model]


def _buckets(counts: list[int]) -> list[tuple[str, float]]:
    """Cumulative Prometheus buckets from per-bucket counts (the last one: slower than all)."""
    padded = list(counts) + [0] * (len(LATENCY_BOUNDS_S) + 1 - len(counts))
    out, total = [], 0
    for bound, n in zip(LATENCY_BOUNDS_S, padded, strict=False):
        total += n
        out.append((repr(bound), total))
    total += sum(padded[len(LATENCY_BOUNDS_S) :])
    out.append(("+Inf", total))
    return out


@dataclass(frozen=True)
class ProcessLoad:
    """What the scrape reads from the running process (callables: read when scraped)."""

    agents: Callable[[], int]
    capacity: Callable[[], int]
    inflight_llm_calls: Callable[[], int]
    rounds_running: Callable[[], int]


class _LoadCollector(Collector):
    def __init__(self, load: ProcessLoad | None) -> None:
        self.load = load

    def collect(self) -> Iterator[Metric]:
        load = self.load
        values = {
            "agents": ("Agents this process hosts.", load.agents if load else None),
            "capacity": ("Agents this process can host.", load.capacity if load else None),
            "llm_inflight_calls": (
                "LLM requests on the wire from this process now.",
                load.inflight_llm_calls if load else None,
            ),
            "rounds_running": (
                "Rounds this process is playing now.",
                load.rounds_running if load else None,
            ),
        }
        for name, (doc, read) in values.items():
            family = GaugeMetricFamily(f"populace_worker_{name}", doc)
            if read is not None:
                family.add_metric([], read())
            yield family


class WorkerMetrics:
    """One worker process's series, in a registry of its own (tests run several in one
    interpreter, and nothing lands in prometheus_client's global registry)."""

    def __init__(self, load: ProcessLoad | None = None) -> None:
        self.registry = CollectorRegistry()
        self.load = _LoadCollector(load)
        self.registry.register(self.load)
        ProcessCollector(registry=self.registry)  # process_cpu_seconds_total, ..._memory_bytes
        self.rounds = Counter(
            "populace_worker_rounds",
            "Rounds (or a round's retry on some agents) this process finished.",
            registry=self.registry,
        )
        self.round_seconds = Histogram(
            "populace_worker_round_duration_seconds",
            "Time this process took for its part of a round.",
            buckets=ROUND_BUCKETS_S,
            registry=self.registry,
        )
        self.decisions = Counter(
            "populace_worker_decisions",
            "Decisions this process made in finished rounds (status: valid, invalid, late).",
            ["status"],
            registry=self.registry,
        )
        self.endpoints = EndpointSeries("populace_worker", "this process")
        self.registry.register(self.endpoints)

    def round_finished(self, aggregate) -> None:
        """Count one finished round part (a worker_server.rounds.PartialAggregate), once."""
        self.rounds.inc()
        self.round_seconds.observe(aggregate.elapsed_s)
        self.decisions.labels("valid").inc(aggregate.count)
        self.decisions.labels("invalid").inc(aggregate.n_invalid)
        self.decisions.labels("late").inc(aggregate.n_late)
        self.endpoints.add(aggregate.endpoints)


def serve(
    metrics: WorkerMetrics,
    host: str,
    port: int,
    certfile: str | None = None,
    keyfile: str | None = None,
) -> WSGIServer:
    """Serve /metrics on host:port from a daemon thread (over TLS with the node's certificate);
    raises OSError when the address cannot be bound. Stop with .shutdown()."""
    from prometheus_client import start_http_server

    server, _thread = start_http_server(
        port, addr=host, registry=metrics.registry, certfile=certfile, keyfile=keyfile
    )
    return server
