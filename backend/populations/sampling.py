"""Sample a population from its config: exact counts per category, then a seeded shuffle.

Counts come from the largest-remainder method computed in exact rational arithmetic, so they
never depend on float rounding; the order comes from numpy's PCG64 seeded with
``SeedSequence([seed, distribution index])``, one stream per distribution, so distributions are
independent of each other unless one is conditioned on another, and the same config and seed give
the same arrays on every machine.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from backend.populations.config import Distribution, PopulationConfig

# Third SeedSequence word: which stream of a distribution (order, then values within bins).
_ORDER_STREAM = 0
_VALUE_STREAM = 1


@dataclass
class SampledPopulation:
    """Column-wise agents: agent i has category ``categories[d][codes[d][i]]`` for each d."""

    size: int
    seed: int
    codes: dict[str, np.ndarray] = field(default_factory=dict)  # uint32, len == size
    categories: dict[str, list[str]] = field(default_factory=dict)
    values: dict[str, np.ndarray] = field(default_factory=dict)  # int32, numeric bins only
    counts: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return list(self.codes)


def largest_remainder(total: int, weights: list[float]) -> list[int]:
    """Split `total` into integer counts proportional to `weights`, summing to `total` exactly.

    Each count is the floor of its exact quota; the units left over go to the largest fractional
    parts, ties to the earlier category.
    """
    exact = [Fraction(w) for w in weights]
    weight_sum = sum(exact)
    if weight_sum <= 0:
        raise ValueError("weights must have a positive sum")
    quotas = [total * w / weight_sum for w in exact]
    counts = [q.numerator // q.denominator for q in quotas]
    left = total - sum(counts)
    by_remainder = sorted(range(len(quotas)), key=lambda i: (-(quotas[i] - counts[i]), i))
    for i in by_remainder[:left]:
        counts[i] += 1
    return counts


def _rng(seed: int, index: int, stream: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, index, stream])))


def _exact_codes(counts: list[int], codes: list[int], rng: np.random.Generator) -> np.ndarray:
    block = np.repeat(np.asarray(codes, dtype=np.uint32), counts)
    rng.shuffle(block)
    return block


def sample(config: PopulationConfig) -> SampledPopulation:
    """Every agent's categories (and bin values) as numpy columns; deterministic in the seed."""
    population = SampledPopulation(size=config.size, seed=config.seed)
    for index, dist in enumerate(config.distributions):
        rng = _rng(config.seed, index, _ORDER_STREAM)
        names = dist.category_names
        if dist.kind == "conditional":
            codes = _sample_conditional(dist, names, population, rng)
        else:
            items = dist.bins if dist.kind == "bins" else dist.categories
            counts = largest_remainder(config.size, [item.weight for item in items])
            codes = _exact_codes(counts, list(range(len(names))), rng)
        population.codes[dist.name] = codes
        population.categories[dist.name] = names
        per_category = np.bincount(codes, minlength=len(names))
        population.counts[dist.name] = {n: int(c) for n, c in zip(names, per_category, strict=True)}
        if dist.kind == "bins":
            population.values[dist.name] = _bin_values(dist, codes, config.seed, index)
    return population


def _sample_conditional(
    dist: Distribution, names: list[str], population: SampledPopulation, rng: np.random.Generator
) -> np.ndarray:
    parent_codes = population.codes[dist.given]
    parent_names = population.categories[dist.given]
    code_of = {name: i for i, name in enumerate(names)}
    child = np.empty(population.size, dtype=np.uint32)
    for parent_name, members in zip(
        parent_names, _groups(parent_codes, len(parent_names)), strict=True
    ):
        branch = dist.conditional[parent_name]
        counts = largest_remainder(len(members), [c.weight for c in branch])
        child[members] = _exact_codes(counts, [code_of[c.name] for c in branch], rng)
    return child


def _groups(codes: np.ndarray, n_categories: int) -> list[np.ndarray]:
    """The agent indices having each code, each in ascending agent order."""
    if n_categories <= 32:
        # One vectorised comparison per category beats a sort while categories are few.
        return [np.flatnonzero(codes == c) for c in range(n_categories)]
    order = np.argsort(codes, kind="stable")
    bounds = np.cumsum(np.bincount(codes, minlength=n_categories))[:-1]
    return np.split(order, bounds)


def _bin_values(dist: Distribution, codes: np.ndarray, seed: int, index: int) -> np.ndarray:
    """A uniform integer within each agent's bin, drawn bin by bin in agent order."""
    rng = _rng(seed, index, _VALUE_STREAM)
    values = np.empty(len(codes), dtype=np.int32)
    for b, members in zip(dist.bins, _groups(codes, len(dist.bins)), strict=True):
        values[members] = rng.integers(b.min, b.max, size=len(members), endpoint=True)
    return values


def attribute_dict(sampled: SampledPopulation, i: int) -> dict[str, str]:
    """One agent's attributes as strings; a binned attribute also gives ``<name>_value``."""
    attributes = {}
    for name, codes in sampled.codes.items():
        attributes[name] = sampled.categories[name][int(codes[i])]
        if name in sampled.values:
            attributes[f"{name}_value"] = str(int(sampled.values[name][i]))
    return attributes


def attribute_dicts(sampled: SampledPopulation, rows=None) -> list[dict[str, str]]:
    """`attribute_dict` for many agents at once (all when `rows` is None), column by column."""
    rows = np.arange(sampled.size) if rows is None else np.asarray(rows, dtype=np.int64)
    keys: list[str] = []
    columns: list[list[str]] = []
    for name, codes in sampled.codes.items():
        labels = np.asarray(sampled.categories[name], dtype=object)
        keys.append(name)
        columns.append(labels[codes[rows]].tolist())
        if name in sampled.values:
            keys.append(f"{name}_value")
            columns.append(_value_strings(sampled.values[name][rows]))
    if not keys:
        return [{} for _ in range(len(rows))]
    # A million small dicts would trigger many needless cycle collections along the way.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return [dict(zip(keys, row, strict=True)) for row in zip(*columns, strict=True)]
    finally:
        if collecting:
            gc.enable()


def _value_strings(values: np.ndarray) -> list[str]:
    """str() of each value, converting each distinct value once."""
    if len(values) == 0:
        return []
    low = int(values.min())
    span = int(values.max()) - low + 1
    if span > 4 * len(values):
        return [str(v) for v in values.tolist()]
    table = np.asarray([str(v) for v in range(low, low + span)], dtype=object)
    return table[values.astype(np.int64) - low].tolist()
