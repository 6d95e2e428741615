"""Merging per-worker partial aggregates gives the statistics of all decisions at once."""

import numpy as np
import pytest

from backend.rounds.merge import merge
from worker_server.rpc import worker_pb2 as pb

RULE = pb.GameRule(ratio=2 / 3, offset=0, min=0, max=100)
BINS = 101


def _partial(values: np.ndarray, segments: np.ndarray) -> pb.PartialAggregate:
    histogram, _ = np.histogram(values, bins=BINS, range=(0, 100))
    part = pb.PartialAggregate(
        count=len(values), n_invalid=1, n_late=2, histogram=histogram.tolist()
    )
    if len(values):
        part.sum, part.sum_sq = float(values.sum()), float((values**2).sum())
        part.min, part.max = float(values.min()), float(values.max())
    for code, name in enumerate(["low", "high"]):
        chosen = values[segments == code]
        part.segments.add(
            attribute="education",
            category=name,
            count=len(chosen),
            sum=float(chosen.sum()),
            sum_sq=float((chosen**2).sum()),
        )
    return part


def test_merge_equals_direct_statistics():
    rng = np.random.default_rng(3)
    values = rng.uniform(0, 100, 10_000)
    values[:3] = [0.0, 100.0, 50.0]  # the range edges land in the first and last bins
    segments = rng.integers(0, 2, len(values))
    cuts = [0, 1234, 1234, 7000, len(values)]  # one worker with no agents of this population
    parts = [_partial(values[a:b], segments[a:b]) for a, b in zip(cuts, cuts[1:], strict=False)]

    stats = merge(parts, RULE, BINS)

    assert stats.n_valid == len(values)
    assert (stats.n_invalid, stats.n_late) == (4, 8)
    assert stats.mean == pytest.approx(values.mean(), rel=1e-12)
    assert stats.std == pytest.approx(values.std(), rel=1e-9)
    assert (stats.min, stats.max) == (0.0, 100.0)
    assert stats.histogram == np.histogram(values, bins=BINS, range=(0, 100))[0].tolist()
    assert stats.target == pytest.approx(2 / 3 * values.mean())
    for code, name in enumerate(["low", "high"]):
        seg = stats.segments["education"][name]
        assert seg.count == (segments == code).sum()
        assert seg.mean == pytest.approx(values[segments == code].mean())


def test_merge_of_nothing_is_empty_not_an_error():
    stats = merge([pb.PartialAggregate(histogram=[0] * BINS)], RULE, BINS)
    assert (stats.n_valid, stats.mean, stats.target) == (0, None, None)
    assert stats.histogram == [0] * BINS


def test_merge_rejects_a_histogram_of_the_wrong_shape():
    with pytest.raises(ValueError, match="histogram bins"):
        merge([pb.PartialAggregate(count=1, histogram=[1] * 10)], RULE, BINS)
