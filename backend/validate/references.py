"""The known results the analytic checks compare runs with, computed here from first principles
(numpy and the standard library only), so a reader can follow each number to its formula.

- Voter model on a clique of k agents, updated synchronously as the built-in `voter` plays it
  (populace/builtins/voter.py): every agent copies a neighbour, i.e. one of the k - 1 *other*
  members, picked uniformly, all at once. With j ones, a 1-holder keeps 1 with probability
  (j - 1)/(k - 1) and a 0-holder takes 1 with probability j/(k - 1), so the next count is
  Binomial(j, (j-1)/(k-1)) + Binomial(k-j, j/(k-1)): a Markov chain on 0..k absorbed at 0 and k.
  Its expected absorption time (and variance) come from the fundamental matrix (I - Q)^-1.
- The initial ones are an exact count drawn over the whole population, so a clique's initial
  count is hypergeometric.
- SIR with one infectious round on an Erdős–Rényi graph of mean degree c is bond percolation
  with probability T: the final size S solves S = 1 - exp(-c T S).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def binomial_pmf(n: int, p: float) -> np.ndarray:
    """P(X = x) for x = 0..n, X ~ Binomial(n, p)."""
    x = np.arange(n + 1)
    if p <= 0.0:
        return (x == 0).astype(float)
    if p >= 1.0:
        return (x == n).astype(float)
    log_comb = np.array(
        [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) for i in x]
    )
    return np.exp(log_comb + x * math.log(p) + (n - x) * math.log1p(-p))


def voter_transitions(k: int) -> np.ndarray:
    """P[j, j'] of the synchronous voter model on a clique of k >= 2 agents."""
    if k < 2:
        raise ValueError("a clique has at least 2 agents")
    P = np.zeros((k + 1, k + 1))
    for j in range(k + 1):
        keep_one = binomial_pmf(j, (j - 1) / (k - 1) if j else 0.0)
        take_one = binomial_pmf(k - j, j / (k - 1))
        P[j] = np.convolve(keep_one, take_one)
    return P


@dataclass(frozen=True)
class Absorption:
    """Rounds until a clique of k agents is unanimous, from each initial count j = 0..k."""

    mean: np.ndarray  # E[T | j]
    variance: np.ndarray  # Var[T | j]


def voter_absorption(k: int) -> Absorption:
    if k == 2:
        # Two agents copying each other swap opinions forever from 1-1: never unanimous.
        raise ValueError("the synchronous voter model on 2 agents never reaches consensus")
    P = voter_transitions(k)
    Q = P[1:k, 1:k]  # the transient states 1..k-1
    fundamental = np.linalg.inv(np.eye(k - 1) - Q)
    t = fundamental.sum(axis=1)
    # Var[T] = (2N - I) t - t^2 (Kemeny and Snell, absorbing chains).
    v = (2 * fundamental - np.eye(k - 1)) @ t - t * t
    return Absorption(np.concatenate([[0.0], t, [0.0]]), np.concatenate([[0.0], v, [0.0]]))


def voter_unanimous_by(k: int, start: np.ndarray, rounds: int) -> np.ndarray:
    """P(T <= t) for t = 0..rounds, the clique's initial count distributed as `start`."""
    P = voter_transitions(k)
    share = np.empty(rounds + 1)
    state = start.copy()
    for t in range(rounds + 1):
        share[t] = state[0] + state[k]
        state = state @ P
    return share


def hypergeometric_pmf(population: int, successes: int, draws: int) -> np.ndarray:
    """P(X = x) for x = 0..draws: ones among `draws` agents of a population holding
    `successes` ones."""

    def log_comb(n: int, r: int) -> float:
        if r < 0 or r > n:
            return -math.inf
        return math.lgamma(n + 1) - math.lgamma(r + 1) - math.lgamma(n - r + 1)

    total = log_comb(population, draws)
    return np.array(
        [
            math.exp(log_comb(successes, x) + log_comb(population - successes, draws - x) - total)
            for x in range(draws + 1)
        ]
    )


@dataclass(frozen=True)
class VoterReference:
    """What a population of cliques of size k, `ones` of `agents` holding 1 at the start, should
    show per clique."""

    exit_probability: float  # P(a clique ends all-1)
    mean_rounds: float  # E[rounds of updates until the clique is unanimous]
    sd_rounds: float  # its standard deviation, over cliques


def voter_reference(agents: int, ones: int, k: int) -> VoterReference:
    """Per clique, its initial count hypergeometric (a uniformly random set of `ones`)."""
    start = hypergeometric_pmf(agents, ones, k)
    absorption = voter_absorption(k)
    mean = float(start @ absorption.mean)
    second = float(start @ (absorption.variance + absorption.mean**2))
    # The share of 1s is a martingale, so a clique starting with j ones ends all-1 with
    # probability j/k; averaged over the start, the population's initial share.
    exit_probability = float(start @ (np.arange(k + 1) / k))
    return VoterReference(exit_probability, mean, math.sqrt(max(second - mean * mean, 0.0)))


@dataclass(frozen=True)
class VoterExpectation:
    """What cliques with known initial counts should show, averaged over the cliques, with the
    standard error of that average (the cliques evolve independently)."""

    exit_share: float
    exit_standard_error: float
    mean_rounds: float
    rounds_standard_error: float


def voter_expectation(k: int, counts: np.ndarray) -> VoterExpectation:
    """`counts`: each clique's number of 1s in round 1."""
    counts = np.asarray(counts, dtype=np.int64)
    n = len(counts)
    absorption = voter_absorption(k)
    p = counts / k
    return VoterExpectation(
        float(p.mean()),
        float(math.sqrt(np.sum(p * (1 - p))) / n),
        float(absorption.mean[counts].mean()),
        float(math.sqrt(np.sum(absorption.variance[counts])) / n),
    )


def final_size(r: float) -> float:
    """The largest root S of S = 1 - exp(-r S) (0 for r <= 1): the share of a large population
    an epidemic reaches, r being c * T."""
    if r <= 1.0:
        return 0.0
    s = 1.0
    for _ in range(200):  # Newton from above converges to the positive root
        f = s - 1.0 + math.exp(-r * s)
        step = f / (1.0 - r * math.exp(-r * s))
        s -= step
        if abs(step) < 1e-15:
            break
    return s
