"""The references `populace validate` compares runs with (backend/validate/references.py),
against brute force: a vectorised simulation of the synchronous voter model and direct
evaluation of the final-size equation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from backend.validate.checks.hegselmann_krause import classify
from backend.validate.references import (
    final_size,
    hypergeometric_pmf,
    voter_absorption,
    voter_expectation,
    voter_reference,
    voter_transitions,
    voter_unanimous_by,
)


def simulate_voter(k: int, ones: int, replicas: int, rng: np.random.Generator) -> np.ndarray:
    """Rounds until each of `replicas` cliques of k is unanimous: every agent copies one of the
    k - 1 others, picked uniformly, all at once (the plugin's rule)."""
    state = np.zeros((replicas, k), dtype=np.int8)
    state[:, :ones] = 1
    rounds = np.zeros(replicas, dtype=np.int64)
    live = np.ones(replicas, dtype=bool)
    while live.any():
        rows = np.flatnonzero(live)
        pick = rng.integers(0, k - 1, size=(rows.size, k))
        pick += pick >= np.arange(k)  # skip oneself: uniform over the others
        state[rows] = np.take_along_axis(state[rows], pick, axis=1)
        rounds[rows] += 1
        total = state[rows].sum(axis=1)
        live[rows] = (total > 0) & (total < k)
    return rounds


def test_transitions_are_a_stochastic_matrix_absorbed_at_both_ends():
    P = voter_transitions(7)
    assert np.allclose(P.sum(axis=1), 1.0)
    assert P[0, 0] == 1.0 and P[7, 7] == 1.0
    # The share of 1s is a martingale.
    assert np.allclose(P @ np.arange(8), np.arange(8))


@pytest.mark.parametrize(("k", "ones"), [(3, 1), (5, 2), (10, 3)])
def test_absorption_time_matches_a_brute_force_simulation(k, ones):
    rng = np.random.default_rng(k * 100 + ones)
    rounds = simulate_voter(k, ones, 40_000, rng)
    absorption = voter_absorption(k)
    se = math.sqrt(absorption.variance[ones] / rounds.size)
    assert abs(rounds.mean() - absorption.mean[ones]) < 4 * se
    assert rounds.var() == pytest.approx(absorption.variance[ones], rel=0.05)


def test_absorption_of_three_by_hand():
    # k = 3, one 1: it copies a 0 for sure; each 0 takes the 1 with probability 1/2, so the
    # next count is Binomial(2, 1/2): 0 w.p. 1/4, 1 w.p. 1/2, 2 w.p. 1/4 (and 2 mirrors 1).
    # E[T] = 1 + (1/2) E[T] + (1/4) E[T]  =>  E[T] = 4.
    assert voter_absorption(3).mean[1] == pytest.approx(4.0)


def test_two_agents_never_agree():
    with pytest.raises(ValueError, match="never reaches consensus"):
        voter_absorption(2)


def test_unanimous_by_sums_to_the_mean_time():
    k = 8
    start = hypergeometric_pmf(1000, 400, k)
    by = voter_unanimous_by(k, start, 2000)
    assert by[-1] == pytest.approx(1.0)
    assert np.sum(1 - by) == pytest.approx(voter_reference(1000, 400, k).mean_rounds, rel=1e-6)


def test_hypergeometric_and_the_exit_probability():
    pmf = hypergeometric_pmf(100, 30, 10)
    assert pmf.sum() == pytest.approx(1.0)
    assert pmf @ np.arange(11) == pytest.approx(3.0)
    assert voter_reference(100, 30, 10).exit_probability == pytest.approx(0.3)


def test_expectation_from_known_starts():
    counts = np.array([1, 2, 2, 3])
    absorption = voter_absorption(5)
    expected = voter_expectation(5, counts)
    assert expected.exit_share == pytest.approx(0.4)
    assert expected.mean_rounds == pytest.approx(absorption.mean[counts].mean())
    p = counts / 5
    assert expected.exit_standard_error == pytest.approx(math.sqrt(np.sum(p * (1 - p))) / 4)


@pytest.mark.parametrize("r", [1.2, 1.5, 2.0, 3.0, 6.0])
def test_final_size_solves_its_equation(r):
    s = final_size(r)
    assert 0 < s < 1
    assert s == pytest.approx(1 - math.exp(-r * s), abs=1e-12)


def test_final_size_known_values_and_no_outbreak_below_one():
    assert final_size(2.0) == pytest.approx(0.7968121300200202)
    assert final_size(1.5) == pytest.approx(0.5828116438658114)
    assert final_size(1.0) == 0.0
    assert final_size(0.5) == 0.0


def test_bounded_confidence_replicas_are_classified():
    assert classify(np.array([0.40, 0.45, 0.5]), 0.25) == "consensus"
    assert classify(np.array([0.1, 0.2, 0.6, 0.7]), 0.25) == "split"
    assert classify(np.array([0.1, 0.3, 0.5, 0.7]), 0.25) == "undecided"
    assert classify(np.array([np.nan]), 0.25) == "undecided"
