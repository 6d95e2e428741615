"""Exactly `count` agents of a population, picked by a seeded draw: Observation.chosen.

The agents' numbers 0..N-1 are permuted by a seeded affine map (the shared rule of
worker_server.rounds.assignment) and an agent is chosen when its permuted number is below
`count`. It depends on the agent's number alone, never on its host or cohort, so the same agents
are chosen on one process or many, and a cohort is decided with numpy at once.
"""

from __future__ import annotations

import numpy as np

from worker_server.rounds.assignment import affine_key

MAX_STREAM = 999


def chosen(seed: int, stream: int, numbers: np.ndarray, size: int, count: int) -> np.ndarray:
    """True for the agents (by number) among the `count` of `size` that stream `stream` picks."""
    if not (isinstance(stream, int) and 0 <= stream <= MAX_STREAM):
        raise ValueError(f"chosen: a stream number in 0..{MAX_STREAM}, not {stream!r}")
    if not (isinstance(count, int | np.integer) and 0 <= count <= size):
        raise ValueError(f"chosen: a count in 0..{size} (the population), not {count!r}")
    multiplier, offset = affine_key(seed, size, f"populace.chosen.{stream}")
    numbers = np.asarray(numbers, dtype=np.int64) % size
    # (multiplier * number) mod size, exact in int64 for sizes up to 2^32: with the multiplier
    # split into 16-bit halves every product stays below 2^48.
    high, low = divmod(multiplier, 1 << 16)
    permuted = ((numbers * high) % size * (1 << 16) + numbers * low + offset) % size
    return permuted < count
