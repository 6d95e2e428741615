"""Partial aggregates: histogram edges and per-segment sums, checked against direct numpy."""

from __future__ import annotations

import numpy as np

from worker_server.agents import Attribute
from worker_server.rounds.aggregate import Aggregator


def test_default_bins_put_integer_k_in_bin_k_and_max_in_the_last_bin():
    aggregator = Aggregator(0.0, 100.0, 101)
    values = np.arange(101, dtype=np.float64)
    aggregator.add(np.arange(101), values)
    assert aggregator.histogram.tolist() == [1] * 101


def test_histogram_edges_are_half_open_except_the_last():
    aggregator = Aggregator(0.0, 100.0, 4)
    values = np.array([0.0, 24.999, 25.0, 49.99, 50.0, 75.0, 99.99, 100.0])
    aggregator.add(np.arange(len(values)), values)
    assert aggregator.histogram.tolist() == [2, 2, 1, 3]
    assert aggregator.histogram.tolist() == np.histogram(values, 4, range=(0, 100))[0].tolist()


def test_sums_and_extremes_accumulate_over_cohorts():
    rng = np.random.default_rng(0)
    values = rng.uniform(10, 20, 1000)
    aggregator = Aggregator(0.0, 100.0, 10)
    for part in np.array_split(np.arange(1000), 7):
        aggregator.add(part, values[part])
    result = aggregator.result(elapsed_s=1.5)
    assert result.count == 1000
    assert np.isclose(result.sum, values.sum()) and np.isclose(result.sum_sq, (values**2).sum())
    assert (result.min, result.max) == (values.min(), values.max())
    assert result.histogram.tolist() == [0, 1000 - (values >= 20).sum(), 0, 0, 0, 0, 0, 0, 0, 0]
    assert result.elapsed_s == 1.5


def test_segments_cover_every_category_and_skip_agents_without_a_value():
    codes = np.array([0, 2, 2, 65535, 0, 2], dtype=np.uint16)  # 65535: no value
    attribute = Attribute("education", ("primary", "master", "doctorate"), codes)
    values = np.array([10.0, 20.0, 30.0, 99.0, 50.0, 1.0])
    aggregator = Aggregator(0.0, 100.0, 101, [attribute])
    aggregator.add(np.array([0, 1, 2, 3]), values[:4])
    aggregator.add(np.array([4, 5]), values[4:])
    segments = {s.category: (s.count, s.sum, s.sum_sq) for s in aggregator.result(0).segments}
    assert segments == {
        "primary": (2, 60.0, 2600.0),
        "master": (0, 0.0, 0.0),
        "doctorate": (3, 51.0, 1301.0),
    }
    assert aggregator.result(0).count == 6, "the totals still count the agent without a value"


def test_an_empty_aggregate_has_zero_counts_and_a_zero_histogram():
    result = Aggregator(0.0, 100.0, 101).result(0.0)
    assert (result.count, result.sum, result.min, result.max) == (0, 0.0, 0.0, 0.0)
    assert result.histogram.tolist() == [0] * 101
