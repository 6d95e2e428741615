"""The global environment's merge step: exact round statistics from per-worker partials.

Counts, sums and sums of squares add; min and max combine; histograms add bin by bin; segments
add per (attribute, category). Nothing here reads individual decisions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from worker_server.rounds.aggregate import Aggregator
from worker_server.rounds.wire import aggregate_message
from worker_server.rpc import worker_pb2 as pb


@dataclass
class SegmentStats:
    count: int = 0
    sum: float = 0.0
    sum_sq: float = 0.0

    @property
    def mean(self) -> float | None:
        return self.sum / self.count if self.count else None


@dataclass
class RoundStats:
    n_valid: int
    n_invalid: int
    n_late: int
    mean: float | None
    std: float | None
    min: float | None
    max: float | None
    histogram: list[int]
    target: float | None
    # {attribute: {category: SegmentStats}}
    segments: dict[str, dict[str, SegmentStats]] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "n_valid": self.n_valid,
            "n_invalid": self.n_invalid,
            "n_late": self.n_late,
            "mean": self.mean,
            "std": self.std,
            "min": self.min,
            "max": self.max,
            "target": self.target,
            "histogram": self.histogram,
            "segments": {
                attr: {cat: {"count": s.count, "mean": s.mean} for cat, s in cats.items()}
                for attr, cats in self.segments.items()
            },
        }


def merge(parts: Iterable[pb.PartialAggregate], rule: pb.GameRule, bins: int) -> RoundStats:
    count, total, total_sq, n_invalid, n_late = 0, 0.0, 0.0, 0, 0
    low, high = math.inf, -math.inf
    histogram = np.zeros(bins, dtype=np.int64)
    segments: dict[str, dict[str, SegmentStats]] = {}
    for part in parts:
        n_invalid += part.n_invalid
        n_late += part.n_late
        if len(part.histogram) not in (0, bins):
            raise ValueError(f"a worker sent {len(part.histogram)} histogram bins, expected {bins}")
        if part.histogram:
            histogram += np.asarray(part.histogram, dtype=np.int64)
        for seg in part.segments:
            stats = segments.setdefault(seg.attribute, {}).setdefault(seg.category, SegmentStats())
            stats.count += seg.count
            stats.sum += seg.sum
            stats.sum_sq += seg.sum_sq
        if part.count == 0:
            continue
        count += part.count
        total += part.sum
        total_sq += part.sum_sq
        low = min(low, part.min)
        high = max(high, part.max)
    if count == 0:
        return RoundStats(
            0, n_invalid, n_late, None, None, None, None, histogram.tolist(), None, segments
        )
    mean = total / count
    # Population variance from the sums; clamp the rounding error that can dip below zero.
    std = math.sqrt(max(0.0, total_sq / count - mean * mean))
    target = rule.ratio * mean + rule.offset
    return RoundStats(
        count, n_invalid, n_late, mean, std, low, high, histogram.tolist(), target, segments
    )


def aggregate_of(
    values: np.ndarray,
    n_invalid: int,
    n_late: int,
    rule: pb.GameRule,
    bins: int,
    endpoints=(),
) -> pb.PartialAggregate:
    """The partial aggregate of decisions the manager holds itself (those a worker streamed
    before its stream broke), built by the workers' own aggregator so it bins, sums and bounds
    exactly as theirs do. Without segments: they need the agents' attributes, which only the
    workers hold. endpoints: the worker's last reported LLM usage, for the meters."""
    aggregator = Aggregator(rule.min, rule.max, bins)
    aggregator.add(np.empty(0, np.int64), np.asarray(values, dtype=np.float64))
    aggregator.n_invalid, aggregator.n_late = n_invalid, n_late
    aggregate = aggregate_message(aggregator.result(0.0)).aggregate
    aggregate.endpoints.extend(endpoints)
    for usage in endpoints:
        aggregate.prompt_tokens += usage.prompt_tokens
        aggregate.cached_tokens += usage.cached_tokens
        aggregate.completion_tokens += usage.completion_tokens
    return aggregate
