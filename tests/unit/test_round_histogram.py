"""A round's histogram (worker_server/rounds/aggregate.histogram) counts exactly as
numpy.histogram does, on whole numbers (counted per integer first) and on any other values."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worker_server.rounds.aggregate import histogram


@settings(max_examples=200, deadline=None)
@given(
    low=st.integers(-50, 50),
    span=st.integers(0, 300),
    bins=st.integers(1, 120),
    n=st.integers(0, 400),
    seed=st.integers(0, 2**32 - 1),
    fractional=st.booleans(),
)
def test_counts_equal_numpys(low, span, bins, n, seed, fractional):
    high = low + span
    rng = np.random.default_rng(seed)
    values = rng.integers(low, high + 1, n).astype(np.float64)
    if fractional and n:
        values[rng.random(n) < 0.3] += 0.5
        values = np.clip(values, low, high)
    if span == 0:
        high = low + 1.0  # numpy needs a range with width
    expected = np.histogram(values, bins=bins, range=(low, high))[0]
    got = histogram(values, bins, float(low), float(high))
    np.testing.assert_array_equal(got, expected)
    assert got.dtype == np.int64 and got.sum() == n


@pytest.mark.parametrize("low, high", [(0.0, 100.0), (0.0, 2.0), (0.0, 1.0), (-0.5, 2.5)])
def test_a_plugin_rounds_values_land_where_numpy_puts_them(low, high):
    values = np.random.default_rng(1).integers(0, 3, 100_000).astype(np.float64)
    values = values[(values >= low) & (values <= high)]
    for bins in (3, 101):
        np.testing.assert_array_equal(
            histogram(values, bins, low, high), np.histogram(values, bins, (low, high))[0]
        )
