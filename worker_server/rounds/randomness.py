"""Per-agent random numbers that do not depend on where an agent is placed.

An agent's draw is a pure function of (seed, round, stream, agent id): a counter-based generator
(two rounds of the SplitMix64 finaliser over the id xor a key derived from seed, round and
stream). So a round gives every agent the same numbers whether its population sits on one
process or is split over many, in any order or cohort size; and different streams (the uniform
of `synthetic`, the two uniforms behind level-k's gaussian noise) are independent.
"""

from __future__ import annotations

import numpy as np

_MASK = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB

# Streams: one per independent draw a policy makes per agent and round.
SYNTHETIC_UNIFORM = 1
NOISE_U1 = 2
NOISE_U2 = 3
LLM_SEED = 4
# The uniform an agent draws its answer with from a distribution read once (exchangeable).
LLM_DRAW = 5


def _mix(x: int) -> int:
    x = (x + _GAMMA) & _MASK
    x = ((x ^ (x >> 30)) * _M1) & _MASK
    x = ((x ^ (x >> 27)) * _M2) & _MASK
    return x ^ (x >> 31)


def _mix_array(x: np.ndarray) -> np.ndarray:
    # uint64 array arithmetic wraps modulo 2^64, which is what SplitMix64 wants.
    x = x + np.uint64(_GAMMA)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(_M1)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(_M2)
    return x ^ (x >> np.uint64(31))


def stream_key(seed: int, round_number: int, stream: int) -> int:
    return _mix(_mix(_mix(seed & _MASK) ^ (round_number & _MASK)) ^ (stream & _MASK))


def words(seed: int, round_number: int, stream: int, ids: np.ndarray) -> np.ndarray:
    """One uint64 per agent id (e.g. the seed of its LLM request)."""
    key = np.uint64(stream_key(seed, round_number, stream))
    return _mix_array(_mix_array(np.asarray(ids, dtype=np.int64).view(np.uint64) ^ key))


def uniforms(seed: int, round_number: int, stream: int, ids: np.ndarray) -> np.ndarray:
    """One float64 in [0, 1) per agent id."""
    bits = words(seed, round_number, stream, ids)
    return (bits >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def normals(seed: int, round_number: int, ids: np.ndarray) -> np.ndarray:
    """One standard normal per agent id (Box-Muller over two independent streams)."""
    u1 = uniforms(seed, round_number, NOISE_U1, ids)
    u2 = uniforms(seed, round_number, NOISE_U2, ids)
    return np.sqrt(-2.0 * np.log1p(-u1)) * np.cos(2.0 * np.pi * u2)
