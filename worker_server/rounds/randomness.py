"""Per-agent random numbers that do not depend on where an agent is placed.

An agent's draw is a pure function of (seed, round, stream, agent id): a counter-based generator
(two rounds of the SplitMix64 finaliser over the id xor a key derived from seed, round and
stream). So a round gives every agent the same numbers whether its population sits on one
process or is split over many, in any order or cohort size; and different streams (the uniform
of `synthetic`, the two uniforms behind level-k's gaussian noise) are independent.
"""

from __future__ import annotations

import math

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
    """One standard normal per agent id (Box-Muller over two independent streams).

    The logarithm and cosine are this module's own (`_log`, `_cos_2pi`), made of +, -, *, / and
    sqrt only, which IEEE 754 rounds the same on every CPU: numpy's log1p and cos take
    CPU-specific SIMD paths (SVML on AVX-512) whose last bits differ from libm's, and a run's
    decisions must be the same bytes on any machine."""
    u1 = uniforms(seed, round_number, NOISE_U1, ids)
    u2 = uniforms(seed, round_number, NOISE_U2, ids)
    # 1 - u1 is exact (u1 is a multiple of 2^-53) and lies in (0, 1].
    return np.sqrt(-2.0 * _log(1.0 - u1)) * _cos_2pi(u2)


_LN2_HI = 6.93147180369123816490e-01  # ln 2 split so that e * _LN2_HI is exact (fdlibm)
_LN2_LO = 1.90821492927058770002e-10
_SQRT_HALF = 0.7071067811865476
# log(m) = 2 atanh(s), s = (m - 1) / (m + 1): 2 (s + s^3/3 + s^5/5 + ...), |s| <= 0.1716.
_ATANH_TERMS = tuple(2.0 / (2 * k + 1) for k in range(12))
# cos a and sin a for |a| <= pi/4, Taylor terms to a^16 and a^17 (the next is below 2^-60).
_COS_TERMS = tuple((-1) ** k / math.factorial(2 * k) for k in range(9))
_SIN_TERMS = tuple((-1) ** k / math.factorial(2 * k + 1) for k in range(9))


def _horner(x: np.ndarray, terms: tuple[float, ...]) -> np.ndarray:
    """terms[0] + terms[1] x + terms[2] x^2 + ..., one rounding per step, in a fixed order."""
    out = np.full_like(x, terms[-1])
    for term in reversed(terms[:-1]):
        out *= x
        out += term
    return out


def _log(x: np.ndarray) -> np.ndarray:
    """Natural log of positive x to within a few units in the last place, the same bits on
    every CPU (frexp is exact)."""
    m, e = np.frexp(x)
    low = m < _SQRT_HALF
    m = np.where(low, m * 2.0, m)  # exact: m in [sqrt(1/2), sqrt(2))
    e = (e - low).astype(np.float64)
    s = (m - 1.0) / (m + 1.0)
    log_m = s * _horner(s * s, _ATANH_TERMS)
    return e * _LN2_HI + (log_m + e * _LN2_LO)


def _cos_2pi(t: np.ndarray) -> np.ndarray:
    """cos(2 pi t) for t in [0, 1), the same bits on every CPU: a quarter-turn q taken out
    exactly, the rest a in [-pi/4, pi/4] by Taylor series."""
    q = np.floor(t * 4.0 + 0.5)
    a = (2.0 * math.pi) * (t - q * 0.25)
    a2 = a * a
    cos_a = _horner(a2, _COS_TERMS)
    sin_a = a * _horner(a2, _SIN_TERMS)
    quarter = q.astype(np.int64) % 4
    return np.select(
        [quarter == 0, quarter == 1, quarter == 2], [cos_a, -sin_a, -cos_a], default=sin_a
    )
