"""Seeded graph generators: the same spec, size and seed give byte-identical CSR arrays.

Every generator works on whole arrays (no Python loop per agent): at 10^6 agents each takes
seconds (BENCHMARKS.md). The random stream is numpy's PCG64 from SeedSequence([seed, GRAPH_STREAM])
so the graph's randomness never overlaps the persona sampling's, which uses the bare seed.
"""

from __future__ import annotations

import numpy as np

from worker_server.graphs.barabasi_albert import barabasi_albert
from worker_server.graphs.csr import Graph, canonical_keys, from_keys, index_dtype
from worker_server.graphs.spec import (
    BarabasiAlbertGraph,
    CliquesGraph,
    ErdosRenyiGraph,
    GraphSpec,
    WattsStrogatzGraph,
    check_for_size,
)

GRAPH_STREAM = 0x6E6574  # "net": a stream of its own under the population seed
# Redraw rounds before a Watts-Strogatz edge that keeps landing on taken pairs stays on its ring
# pair (only near-complete graphs get there: networkx skips such rewirings too).
MAX_REWIRE_ROUNDS = 64


def graph_rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, GRAPH_STREAM]))


def generate(spec: GraphSpec, size: int, seed: int) -> Graph | None:
    """The population's graph; None for `complete` (no edges stored). Edge lists are parsed on
    the manager (backend.graphs.edge_list), not generated."""
    check_for_size(spec, size)
    rng = graph_rng(seed)
    match spec:
        case ErdosRenyiGraph():
            return erdos_renyi(size, spec.mean_degree, rng)
        case WattsStrogatzGraph():
            return watts_strogatz(size, spec.k, spec.p, rng)
        case BarabasiAlbertGraph():
            return barabasi_albert(size, spec.m, rng)
        case CliquesGraph():
            return cliques(size, spec.size)
    if spec.kind == "complete":
        return None
    raise ValueError(f"graph kind {spec.kind!r} is not generated (it is uploaded)")


def erdos_renyi(n: int, mean_degree: float, rng: np.random.Generator) -> Graph:
    """G(n, p) with p = mean_degree / (n - 1), by geometric skipping (Batagelj and Brandes,
    2005): the gaps between successive edges, in row-major order over pairs lo < hi, are
    geometric(p). The pairs come out sorted and distinct, so no sort or dedupe is needed.
    """
    pairs = n * (n - 1) // 2
    if pairs == 0:
        return from_keys(n, np.empty(0, dtype=np.int64))
    p = min(mean_degree / (n - 1), 1.0)
    chunks, last = [], -1
    while last < pairs:
        expected = (pairs - last) * p
        gaps = rng.geometric(p, size=int(expected + 6 * expected**0.5) + 64)
        ranks = last + np.cumsum(gaps)
        chunks.append(ranks)
        last = int(ranks[-1])
    ranks = np.concatenate(chunks)
    ranks = ranks[: np.searchsorted(ranks, pairs)]
    lo = _pair_row(ranks, n)
    hi = ranks - _row_start(lo, n) + lo + 1
    return from_keys(n, lo * n + hi)


def _row_start(lo: np.ndarray, n: int) -> np.ndarray:
    """Rank of the pair (lo, lo + 1): the pairs of rows 0..lo-1 come first."""
    return lo * (2 * n - lo - 1) // 2


def _pair_row(ranks: np.ndarray, n: int) -> np.ndarray:
    """The row lo of each pair rank, by the quadratic formula, then made exact in integers."""
    b = 2 * n - 1
    lo = np.floor((b - np.sqrt(float(b) ** 2 - 8.0 * ranks)) / 2).astype(np.int64)
    lo = np.clip(lo, 0, n - 2)
    for _ in range(2):  # float rounding is off by at most one row
        lo -= _row_start(lo, n) > ranks
        lo += (lo < n - 2) & (_row_start(lo + 1, n) <= ranks)
    return lo


def _merge(*sorted_runs: np.ndarray) -> np.ndarray:
    """One sorted array from sorted ones: numpy's stable sort (timsort) merges runs in linear
    time, where the default sort would start over."""
    return np.sort(np.concatenate(sorted_runs), kind="stable")


def watts_strogatz(n: int, k: int, p: float, rng: np.random.Generator) -> Graph:
    """Ring lattice (each agent to its k/2 next ones) with each edge's far end rewired with
    probability p to a uniformly random agent, all edges at once.

    A draw may not land on a pair that is taken: an edge staying on the ring, one already
    rewired, an edge still waiting to move (as in networkx, where it is still there), or another
    draw of the same round (the lowest edge index wins). Those redraw next round; an edge that
    finds no free pair in MAX_REWIRE_ROUNDS stays on its ring pair, which nobody could take. So
    the edge count never changes and the mean degree stays exactly k. networkx rewires edge by
    edge, so the graphs differ in detail, not in distribution.
    """
    half = k // 2
    near = np.repeat(np.arange(n, dtype=np.int64), half)
    far = (near + np.tile(np.arange(1, half + 1, dtype=np.int64), n)) % n
    rewire = rng.random(near.size) < p
    # Lattice keys ascend except where the ring wraps: a stable sort sees the runs.
    kept = np.sort(canonical_keys(near[~rewire], far[~rewire], n), kind="stable")
    origin = near[rewire]
    ring_pairs = canonical_keys(origin, far[rewire], n)
    del near, far
    placed = np.empty(0, dtype=np.int64)
    pending = np.arange(origin.size)
    for _ in range(MAX_REWIRE_ROUNDS):
        if pending.size == 0:
            break
        waiting = np.sort(ring_pairs[pending])
        w = rng.integers(0, n - 1, size=pending.size, dtype=np.int64)
        w += w >= origin[pending]
        drawn = canonical_keys(origin[pending], w, n)
        free = ~(_contains(kept, drawn) | _contains(placed, drawn) | _contains(waiting, drawn))
        free &= _first_of_each(drawn)
        placed = _merge(placed, np.sort(drawn[free]))
        pending = pending[~free]
    keys = _merge(kept, placed, np.sort(ring_pairs[pending]))
    return from_keys(n, keys)


def _contains(sorted_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    if sorted_keys.size == 0:
        return np.zeros(keys.size, dtype=bool)
    at = np.searchsorted(sorted_keys, keys)
    return sorted_keys[np.minimum(at, sorted_keys.size - 1)] == keys


def _first_of_each(keys: np.ndarray) -> np.ndarray:
    """True at the first position of each distinct key (by position: deterministic)."""
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    first = np.ones(keys.size, dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    result = np.empty(keys.size, dtype=bool)
    result[order] = first
    return result


def cliques(n: int, size: int) -> Graph:
    """Disjoint complete groups of `size` contiguous ids (size divides n, checked by the spec).

    Built straight into CSR: row i lists its group's other members in order.
    """
    groups = n // size
    dtype = index_dtype(n)
    indptr = np.arange(n + 1, dtype=np.int64) * (size - 1)
    # Member r of a group lists the others: 0..size-2, shifted past itself.
    slot = np.arange(size - 1, dtype=np.int64)[None, :]
    others = slot + (slot >= np.arange(size, dtype=np.int64)[:, None])
    base = (np.arange(groups, dtype=np.int64) * size)[:, None, None]
    indices = (base + others[None, :, :]).reshape(-1).astype(dtype)
    return Graph(nodes=n, indptr=indptr, indices=indices)
