"""Voter model on disjoint cliques: the share of cliques ending all-1, and the mean rounds until
a clique is unanimous, against the synchronous rule's Markov chain (references.py).

Both come from the rounds' declared metrics: `groups_at_consensus` per round gives how many
cliques are unanimous by each round (a unanimous clique stays so), and the last round's
`share_ones` is the share of cliques at 1 (equal sizes, all unanimous). The reference
conditions on each clique's initial count, read from round 1's export: the plugin draws its
exact count of 1s by a seeded affine permutation of agent numbers, which spreads them far more
evenly over consecutive numbers (a clique) than a uniformly random set would (hypergeometric),
and the expected time depends on the start."""

from __future__ import annotations

import time

import numpy as np

from backend.validate import figures
from backend.validate.context import Context
from backend.validate.references import (
    hypergeometric_pmf,
    voter_expectation,
    voter_reference,
    voter_unanimous_by,
)
from backend.validate.result import FAIL, CheckResult, not_run, within
from backend.validate.runs import Run, values_of

INITIAL_SHARE = 0.3
SEED = 11
MAX_ROUNDS = 1000  # the API's limit

HOW_EXIT = (
    "The share of 1s in a clique is a martingale under the synchronous rule (each agent copies "
    "one of the k - 1 others), so a clique starting with j ones ends all-1 with probability "
    "j/k; averaged over the cliques, that is the initial share. Tolerance: 3 standard errors "
    "of that average, sqrt(sum of p(1-p))/cliques with p = j/k of each clique."
)
HOW_TIME = (
    "Exact, from the Markov chain on the number of 1s in a clique of k: with j ones the next "
    "count is Binomial(j, (j-1)/(k-1)) + Binomial(k-j, j/(k-1)); the expected rounds to "
    "absorption at 0 or k and their variance come from the fundamental matrix (I - Q)^-1, "
    "averaged over the cliques' initial counts as round 1's export shows them (the plugin "
    "spreads its exact count of 1s more evenly over a clique than a random draw: see "
    "details.initial_counts beside the hypergeometric reference). Measured: the sum over "
    "rounds of the share of cliques not yet unanimous (the run's groups_at_consensus "
    "metric). Tolerance: 3 standard errors of the mean over independent cliques, from the "
    "chain's own variances."
)


EXIT_TITLE = "Voter on cliques: share of cliques ending all-1 = initial share"
TIME_TITLE = "Voter on cliques: mean rounds to consensus = Markov chain's"


def _simulate(context: Context, population: int) -> Run:
    return context.runs.simulate(
        {
            "population_id": population,
            "name": "validate voter",
            "rounds": MAX_ROUNDS,
            "seed": SEED,
            "plugin": {"name": "voter", "params": {"initial_share": INITIAL_SHARE}},
        }
    )


def _initial_counts(context: Context, simulation_id: int, k: int, cliques: int) -> np.ndarray:
    """The number of 1s in each clique at round 1, from the run's export."""
    first = values_of(context.runs.export_csv(simulation_id, round=1))
    counts = np.bincount(first.agent // k, weights=first.value == 1, minlength=cliques)
    return counts.astype(np.int64)


def _exit_result(expected, share_at_one: float, start_details: dict, common: dict) -> CheckResult:
    exit_tolerance = 3 * expected.exit_standard_error
    return CheckResult(
        "voter.exit_probability",
        EXIT_TITLE,
        expected.exit_share,
        share_at_one,
        f"± {exit_tolerance:.4f} (3 SE)",
        within(share_at_one, expected.exit_share, exit_tolerance),
        how=HOW_EXIT,
        details={"standard_error": expected.exit_standard_error, **start_details},
        **common,
    )


def _time_result(
    expected, random_start, unanimous: np.ndarray, start_details: dict, common: dict
) -> CheckResult:
    # E[T] = sum over t >= 0 of P(T > t); round r + 1 shows the state after t = r updates.
    mean_rounds = float(np.sum(1.0 - unanimous))
    time_tolerance = 3 * expected.rounds_standard_error
    return CheckResult(
        "voter.consensus_rounds",
        TIME_TITLE,
        expected.mean_rounds,
        mean_rounds,
        f"± {time_tolerance:.3f} rounds (3 SE)",
        within(mean_rounds, expected.mean_rounds, time_tolerance),
        how=HOW_TIME,
        details={
            "standard_error": expected.rounds_standard_error,
            "mean_rounds_if_random_start": random_start.mean_rounds,
            "unanimous_by_round": unanimous.tolist(),
            **start_details,
        },
        **common,
    )


def run(context: Context) -> list[CheckResult]:
    if "voter" not in context.plugins:
        reason = "the plugin voter is not installed on the manager"
        return [
            not_run("voter.exit_probability", EXIT_TITLE, reason),
            not_run("voter.consensus_rounds", TIME_TITLE, reason),
        ]
    started = time.monotonic()
    sizes = context.sizes
    agents, k = sizes.voter_agents, sizes.voter_clique
    cliques = agents // k
    population = context.population("voter", agents, {"kind": "cliques", "size": k})
    context.say(f"  voter: {cliques:,} cliques of {k}, initial share {INITIAL_SHARE}")
    played = _simulate(context, population)
    unanimous = np.array(played.metric("groups_at_consensus"), dtype=float) / cliques
    ones = round(INITIAL_SHARE * agents)
    counts = _initial_counts(context, played.simulation_id, k, cliques)
    expected = voter_expectation(k, counts)
    random_start = voter_reference(agents, ones, k)
    sizes_used = {"agents": agents, "clique": k, "cliques": cliques, "rounds": len(played.rounds)}
    seconds = time.monotonic() - started
    if unanimous[-1] < 1.0:
        reason = f"not every clique was unanimous after {len(played.rounds)} rounds"
        return [
            CheckResult("voter.exit_probability", EXIT_TITLE, None, None, "-", FAIL, reason),
            CheckResult("voter.consensus_rounds", TIME_TITLE, None, None, "-", FAIL, reason),
        ]
    share_at_one = played.metric("share_ones")[-1]
    start = np.bincount(counts, minlength=k + 1) / cliques
    expected_by = voter_unanimous_by(k, start, len(unanimous) - 1)
    figure = figures.voter(context.out, unanimous, expected_by, k)
    common = {"sizes": sizes_used, "figure": figure, "seconds": seconds}
    start_details = {
        "initial_counts": start.tolist(),
        "hypergeometric_counts": hypergeometric_pmf(agents, ones, k).tolist(),
        "simulation_id": played.simulation_id,
    }
    return [
        _exit_result(expected, share_at_one, start_details, common),
        _time_result(expected, random_start, unanimous, start_details, common),
    ]
