"""Which part of a mixed policy each agent plays: the one rule the manager and the workers share.

An agent's part depends only on the agent (its number in the population, or its category of an
attribute), never on the worker hosting it or the cohort it falls in, so a mixed run exports the
same decisions on one process or many.

- By share: the agents' numbers 0..N-1 are permuted by a seeded affine map,
  k -> (multiplier * k + offset) mod N with multiplier coprime to N, and the agent plays the
  first part whose bound exceeds its permuted number. Bounds are cumulative counts, so each
  part gets exactly round(cumulative share * N) - (the previous bound) agents.
- By attribute: the agent's category picks its part; other categories (and agents without
  one) play the default part.

Both are numpy over a whole cohort: nothing here runs once per agent.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

# Shares must add up to 1 within this (they are written as decimals, e.g. 0.1 + 0.2 + 0.7).
SHARE_TOLERANCE = 1e-9
# Agent numbers are the low 32 bits of an id (populace.plugin.agent_numbers).
MAX_AGENTS = 1 << 32


def share_bounds(shares: Sequence[float], n: int) -> list[int]:
    """Each part's bound on the permuted number: cumulative counts, the last exactly n."""
    total, bounds = 0.0, []
    for share in shares:
        total += share
        bounds.append(min(n, round(total * n)))
    if bounds:
        bounds[-1] = n
    return bounds


def affine_key(seed: int, n: int, purpose: str = "populace.mixture") -> tuple[int, int]:
    """(multiplier, offset) of the run's permutation of 0..n-1: a pure function of the seed,
    n and what it is for (a hash, not a generator whose stream could change with a library
    version)."""
    if n <= 1:
        return 1, 0
    digest = hashlib.blake2b(f"{purpose}:{seed}:{n}".encode(), digest_size=16).digest()
    multiplier = 1 + int.from_bytes(digest[:8], "little") % (n - 1)
    while math.gcd(multiplier, n) != 1:  # a few steps: coprimes are dense
        multiplier = multiplier % (n - 1) + 1
    return multiplier, int.from_bytes(digest[8:], "little") % n


@dataclass(frozen=True)
class ShareAssignment:
    """Parts by share: bounds[i] is part i's cumulative count (the last is n)."""

    n: int
    multiplier: int
    offset: int
    bounds: tuple[int, ...]

    @classmethod
    def seeded(cls, seed: int, shares: Sequence[float], n: int) -> ShareAssignment:
        multiplier, offset = affine_key(seed, n)
        return cls(n, multiplier, offset, tuple(share_bounds(shares, n)))

    def check(self) -> str | None:
        """Why these numbers cannot be an assignment (they came over the wire), or None."""
        if not 0 < self.n <= MAX_AGENTS:
            return f"population_size must be in 1..{MAX_AGENTS}"
        if not (0 < self.multiplier < max(self.n, 2) and math.gcd(self.multiplier, self.n) == 1):
            return "multiplier must be in 1..population_size-1 and coprime to it"
        if not 0 <= self.offset < self.n:
            return "offset must be in 0..population_size-1"
        if not self.bounds or list(self.bounds) != sorted(self.bounds) or self.bounds[-1] != self.n:
            return "bounds must rise to population_size"
        return None

    @property
    def counts(self) -> list[int]:
        return np.diff([0, *self.bounds]).tolist()

    def parts(self, numbers: np.ndarray) -> np.ndarray:
        """Each agent's part (int64) from its number in the population."""
        k = np.asarray(numbers, dtype=np.uint64) % np.uint64(self.n)
        n = np.uint64(self.n)
        # multiplier, k < n <= 2^32: the product fits in 64 bits, and so does adding offset < n
        # to its remainder.
        permuted = (k * np.uint64(self.multiplier) % n + np.uint64(self.offset)) % n
        return np.searchsorted(
            np.asarray(self.bounds, dtype=np.uint64), permuted, side="right"
        ).astype(np.int64)


@dataclass(frozen=True)
class AttributeAssignment:
    """Parts by attribute: by_category[c] is category c's part; the rest play `default`."""

    attribute: str
    by_category: Mapping[str, int]
    default: int

    def table(self, categories: Sequence[str]) -> np.ndarray:
        """Part per category code of a column with these categories, plus one last entry for
        codes past them (an agent without a value)."""
        return np.array(
            [self.by_category.get(c, self.default) for c in categories] + [self.default],
            dtype=np.int64,
        )

    def parts(self, codes: np.ndarray, categories: Sequence[str]) -> np.ndarray:
        """Each agent's part from its category code of the attribute."""
        table = self.table(categories)
        codes = np.asarray(codes, dtype=np.int64)
        return table[np.clip(codes, 0, len(table) - 1)]

    def counts(self, category_counts: Mapping[str, int], total: int, n_parts: int) -> list[int]:
        """Agents per part, from the population's agents per category (`total` in all)."""
        counts = [0] * n_parts
        for category, count in category_counts.items():
            counts[self.by_category.get(category, self.default)] += int(count)
        counts[self.default] += total - sum(counts)
        return counts


Assignment = ShareAssignment | AttributeAssignment
