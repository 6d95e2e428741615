"""The partial aggregate of one round on one process, built cohort by cohort with numpy.

Everything merges across processes by addition (counts, sums, sums of squares, histogram bins,
segment sums, per-endpoint LLM usage) or by min/max. Histogram binning is numpy.histogram's
with range=(min, max): edges = linspace(min, max, bins + 1), bin i counts
edges[i] <= v < edges[i+1], and the last bin also counts v == max. With the default 101 bins
over [0, 100], integer k lands in bin k.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from worker_server.agents import Attribute
from worker_server.llm.usage import EndpointUsage, UsageTally

DEFAULT_BINS = 101
MAX_BINS = 100_000


@dataclass(frozen=True)
class SegmentTotals:
    attribute: str
    category: str
    count: int
    sum: float
    sum_sq: float


@dataclass
class PartialAggregate:
    count: int
    sum: float
    sum_sq: float
    min: float  # 0.0 when count == 0
    max: float
    histogram: np.ndarray  # int64, one per bin
    segments: list[SegmentTotals] = field(default_factory=list)
    n_invalid: int = 0
    n_late: int = 0
    elapsed_s: float = 0.0
    # LLM usage as the servers reported it, and requests that failed after their retries.
    prompt_tokens: int = 0
    # Of prompt_tokens, those the servers took from their prefix cache (0: none, or not reported).
    cached_tokens: int = 0
    completion_tokens: int = 0
    llm_errors: int = 0
    # A network simulation: bytes of values this process sent its peers.
    network_bytes: int = 0
    # Per LLM endpoint (base_url, model) this process used in the round: requests sent (retries
    # included), failed attempts, requests skipped by an open circuit, the last error.
    endpoints: list[EndpointUsage] = field(default_factory=list)


# Whole-number values spanning at most this many integers are counted per integer first.
_MAX_INTEGER_SPAN = 1 << 20


def histogram(values: np.ndarray, bins: int, low: float, high: float) -> np.ndarray:
    """numpy.histogram(values, bins, range=(low, high))'s counts. Whole numbers over a short
    span (a choice, a boolean, an integer action: most plugin rounds) are counted per integer
    with one bincount and those counts binned, exactly as numpy bins each integer: a third of
    numpy's passes over 10^5-10^6 values."""
    lo, hi = math.ceil(low), math.floor(high)
    if len(values) and 0 <= hi - lo < _MAX_INTEGER_SPAN and lo > -(2**31) and hi < 2**31:
        whole = values.astype(np.int32)  # the values lie in [low, high]: half int64's time
        if np.array_equal(whole, values):
            per_integer = np.bincount(whole - lo, minlength=hi - lo + 1)
            integers = np.arange(lo, hi + 1, dtype=np.float64)
            return np.histogram(integers, bins=bins, range=(low, high), weights=per_integer)[
                0
            ].astype(np.int64)
    return np.histogram(values, bins=bins, range=(low, high))[0]


class Aggregator:
    def __init__(
        self, low: float, high: float, bins: int, segment_by: list[Attribute] | None = None
    ) -> None:
        self.low, self.high, self.bins = low, high, bins
        self.count = 0
        self.sum = 0.0
        self.sum_sq = 0.0
        self.min = np.inf
        self.max = -np.inf
        self.histogram = np.zeros(bins, dtype=np.int64)
        self.n_invalid = 0
        self.n_late = 0
        self.prompt_tokens = 0
        self.cached_tokens = 0
        self.completion_tokens = 0
        self.llm_errors = 0
        self.network_bytes = 0
        self.endpoints = UsageTally()
        self._segments = [
            (
                attribute,
                np.zeros(len(attribute.categories), dtype=np.int64),
                np.zeros(len(attribute.categories)),
                np.zeros(len(attribute.categories)),
            )
            for attribute in segment_by or []
        ]

    def add(self, rows: np.ndarray, values: np.ndarray) -> None:
        """Count valid decisions (values within [low, high]) of the given population rows."""
        if len(values) == 0:
            return
        squares = values * values
        self.count += len(values)
        self.sum += float(values.sum())
        self.sum_sq += float(squares.sum())
        self.min = min(self.min, float(values.min()))
        self.max = max(self.max, float(values.max()))
        self.histogram += histogram(values, self.bins, self.low, self.high)
        for attribute, counts, sums, sums_sq in self._segments:
            codes = attribute.codes[rows]
            known = codes != attribute.missing
            if not known.all():
                codes, v, v2 = codes[known], values[known], squares[known]
            else:
                v, v2 = values, squares
            n = len(counts)
            counts += np.bincount(codes, minlength=n)[:n]
            sums += np.bincount(codes, weights=v, minlength=n)[:n]
            sums_sq += np.bincount(codes, weights=v2, minlength=n)[:n]

    def add_endpoints(self, usages: Iterable[EndpointUsage]) -> None:
        """Count a cohort part's per-endpoint LLM usage (a few counters per endpoint)."""
        self.endpoints.add(usages)

    def result(self, elapsed_s: float) -> PartialAggregate:
        segments = [
            SegmentTotals(attribute.name, category, int(c), float(s), float(s2))
            for attribute, counts, sums, sums_sq in self._segments
            for category, c, s, s2 in zip(attribute.categories, counts, sums, sums_sq, strict=True)
        ]
        empty = self.count == 0
        return PartialAggregate(
            count=self.count,
            sum=self.sum,
            sum_sq=self.sum_sq,
            min=0.0 if empty else self.min,
            max=0.0 if empty else self.max,
            histogram=self.histogram,
            segments=segments,
            n_invalid=self.n_invalid,
            n_late=self.n_late,
            elapsed_s=elapsed_s,
            prompt_tokens=self.prompt_tokens,
            cached_tokens=self.cached_tokens,
            completion_tokens=self.completion_tokens,
            llm_errors=self.llm_errors,
            network_bytes=self.network_bytes,
            endpoints=self.endpoints.snapshot(),
        )
