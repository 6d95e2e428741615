"""A chi-square goodness-of-fit test without scipy: the statistic, its p-value and bins that
each expect enough draws, for checking sampled answers against a distribution."""

from __future__ import annotations

import math

import numpy as np


def _gamma_q(a: float, x: float) -> float:
    """The regularized upper incomplete gamma function Q(a, x) (Numerical Recipes 6.2)."""
    if x <= 0:
        return 1.0
    log_front = -x + a * math.log(x) - math.lgamma(a)
    if x < a + 1:  # series for P
        term = total = 1.0 / a
        n = a
        for _ in range(10_000):
            n += 1
            term *= x / n
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return max(0.0, 1.0 - total * math.exp(log_front))
    # Lentz's continued fraction for Q
    tiny = 1e-300
    b = x + 1 - a
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-15:
            break
    return math.exp(log_front) * h


def chi_square_p(statistic: float, dof: int) -> float:
    """P(chi-square with dof degrees of freedom >= statistic)."""
    return _gamma_q(dof / 2, statistic / 2)


def pooled_bins(values: np.ndarray, probabilities: np.ndarray, n: int, minimum: float = 5.0):
    """Upper edges of consecutive value intervals, each expected to hold at least `minimum` of
    n draws from (values, probabilities) (the last one pooled into its neighbour if short)."""
    expected = probabilities / probabilities.sum() * n
    edges, running = [], 0.0
    for value, e in zip(values, expected, strict=True):
        running += e
        if running >= minimum:
            edges.append(value)
            running = 0.0
    if not edges:
        return np.array([np.inf])
    edges[-1] = np.inf  # the remainder joins the last bin
    return np.array(edges)


def chi_square(observed: np.ndarray, values: np.ndarray, probabilities: np.ndarray, edges):
    """(statistic, dof, p) of observed draws against (values, probabilities) over the bins
    (-inf, edges[0]], (edges[0], edges[1]], ..."""
    n = len(observed)
    expected = (
        np.bincount(
            np.searchsorted(edges, values, side="left"),
            weights=probabilities / probabilities.sum(),
            minlength=len(edges),
        )[: len(edges)]
        * n
    )
    counts = np.bincount(np.searchsorted(edges, observed, side="left"), minlength=len(edges))
    counts = counts[: len(edges)]
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(expected > 0, (counts - expected) ** 2 / expected, np.inf * counts)
    statistic = float(terms.sum())
    dof = len(edges) - 1
    # A draw where nothing was expected: impossible under the distribution.
    return statistic, dof, chi_square_p(statistic, dof) if math.isfinite(statistic) else 0.0
