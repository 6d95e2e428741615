"""Who meets whom in a round of a pairing simulation (Observation.partners): pure functions of
the seed, the round and agent numbers, so every process computes the same pairs for its own
agents, whatever the placement and the cohorts, with numpy over whole arrays.

On a graph: a random matching along its edges, the locally dominant matching of random edge
priorities. Every edge {u, v} gets a 64-bit priority, a hash of (seed, round, min(u, v),
max(u, v)); each agent's top edge is its edge of highest priority, and an edge is matched when
it is the top edge of both its ends. Each agent has one top edge, so it is in at most one pair
(a matching), and both ends decide alike (symmetric). The priorities are i.i.d. uniform, so every
edge has the same chance to be matched in a round (about 1 / (deg u + deg v - 1)); the matching
is not maximal, which only slows the dynamics by a constant factor. An agent's top edge needs
its own edges only; whether it is also the far end's top needs the far end's edges, which
another process may host: processes tell each other their agents' top partners for the next
round with their values (worker_server.rounds.network).

On a complete graph (no edges stored): random pairs over the whole population. Agent numbers
0..N-1 are permuted by a seeded bijection (a four-round Feistel network over the smallest
even power of two not below N, walked back into 0..N-1: a cycle walk), and the agents at
permuted positions 2i and 2i + 1 meet; with N odd, the one at position N - 1 sits out. Anyone
can compute any agent's partner from its number alone: position p = P(u), partner
P^-1(p xor 1).
"""

from __future__ import annotations

import numpy as np

from worker_server.rounds.randomness import _mix_array, stream_key

# The runtime's streams for these draws (randomness.py numbers its own below 16; plugin
# policies' start at 1000).
MATCHING_STREAM = 16
PAIRS_STREAM = 17
NONE = -1
_FEISTEL_ROUNDS = 4


def edge_priorities(
    seed: int, round_number: int, agents: np.ndarray, neighbours: np.ndarray
) -> np.ndarray:
    """uint64 priority of each edge (agents[i], neighbours[i]), the same from either end."""
    agents = np.asarray(agents, dtype=np.int64)
    neighbours = np.asarray(neighbours, dtype=np.int64)
    lo = np.minimum(agents, neighbours).astype(np.uint64)
    hi = np.maximum(agents, neighbours).astype(np.uint64)
    key = np.uint64(stream_key(seed, round_number, MATCHING_STREAM))
    return _mix_array(_mix_array((lo << np.uint64(32)) ^ hi ^ key) ^ hi)


def top_partners(
    seed: int, round_number: int, numbers: np.ndarray, offsets: np.ndarray, neighbours: np.ndarray
) -> np.ndarray:
    """Each agent's top partner: the far end of its edge of highest priority (NONE without an
    edge). numbers: the agents' numbers; offsets/neighbours: their CSR rows."""
    numbers = np.asarray(numbers, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    neighbours = np.asarray(neighbours, dtype=np.int64)
    degree = np.diff(offsets)
    top = np.full(len(numbers), NONE, dtype=np.int64)
    if not len(neighbours):
        return top
    owner = np.repeat(np.arange(len(numbers), dtype=np.int64), degree)
    priority = edge_priorities(seed, round_number, numbers[owner], neighbours)
    has = degree > 0
    best = np.zeros(len(numbers), dtype=np.uint64)
    best[has] = np.maximum.reduceat(priority, offsets[:-1][has])
    # The first entry of each row reaching its maximum (a tie, at odds of 2^-64, goes to the
    # lower neighbour: rows are ascending).
    at = np.flatnonzero(priority == best[owner])
    first = np.ones(len(at), dtype=bool)
    first[1:] = owner[at[1:]] != owner[at[:-1]]
    at = at[first]
    top[owner[at]] = neighbours[at]
    return top


def matched(numbers: np.ndarray, tops: np.ndarray, tops_of_tops: np.ndarray) -> np.ndarray:
    """Each agent's partner in the matching (NONE: unmatched), from its top partner and that
    partner's own top partner (NONE when unknown)."""
    return np.where((tops >= 0) & (tops_of_tops == numbers), tops, NONE)


def graph_matching(
    seed: int, round_number: int, offsets: np.ndarray, neighbours: np.ndarray
) -> np.ndarray:
    """The whole graph's matching at once (CSR over agents 0..N-1): each agent's partner or
    NONE. What the processes compute together; the reference for tests."""
    size = len(offsets) - 1
    numbers = np.arange(size, dtype=np.int64)
    tops = top_partners(seed, round_number, numbers, offsets, neighbours)
    tops_of_tops = np.where(tops >= 0, tops[np.maximum(tops, 0)], NONE)
    return matched(numbers, tops, tops_of_tops)


# -- a complete graph: random pairs over the whole population -----------------------------------


def _feistel_keys(seed: int, round_number: int) -> list[np.uint64]:
    base = stream_key(seed, round_number, PAIRS_STREAM)
    return [np.uint64(stream_key(base, r, PAIRS_STREAM)) for r in range(_FEISTEL_ROUNDS)]


def _half_bits(size: int) -> int:
    bits = max(int(size - 1).bit_length(), 2)
    return (bits + 1) // 2


def _feistel(x: np.ndarray, keys: list[np.uint64], half: int, inverse: bool) -> np.ndarray:
    mask = np.uint64((1 << half) - 1)
    shift = np.uint64(half)
    left, right = (x >> shift) & mask, x & mask
    if not inverse:
        for key in keys:
            left, right = right, left ^ (_mix_array(right ^ key) & mask)
    else:
        for key in reversed(keys):
            left, right = right ^ (_mix_array(left ^ key) & mask), left
    return (left << shift) | right


def _permute(x: np.ndarray, size: int, keys: list[np.uint64], inverse: bool) -> np.ndarray:
    """The seeded bijection of 0..size-1 (or its inverse): the Feistel permutation of
    0..4^half-1, applied again to whatever lands at or past size (a cycle walk)."""
    half = _half_bits(size)
    out = _feistel(np.asarray(x, dtype=np.int64).astype(np.uint64), keys, half, inverse)
    outside = np.flatnonzero(out >= np.uint64(size))
    while len(outside):
        out[outside] = _feistel(out[outside], keys, half, inverse)
        outside = outside[out[outside] >= np.uint64(size)]
    return out.astype(np.int64)


def complete_pairs(seed: int, round_number: int, numbers: np.ndarray, size: int) -> np.ndarray:
    """Each agent's partner (NONE: it sits out) among random pairs of the whole population of
    `size` agents, for these agent numbers."""
    numbers = np.asarray(numbers, dtype=np.int64)
    if size < 2:
        return np.full(len(numbers), NONE, dtype=np.int64)
    keys = _feistel_keys(seed, round_number)
    mate = _permute(numbers, size, keys, inverse=False) ^ 1
    inside = mate < size
    partner = np.full(len(numbers), NONE, dtype=np.int64)
    partner[inside] = _permute(mate[inside], size, keys, inverse=True)
    return partner
