"""Seeded graph generators: the same spec, size and seed give byte-identical CSR arrays.

Every generator works on whole arrays (no Python loop per agent): at 10^6 agents each takes
seconds (BENCHMARKS.md). The random stream is numpy's PCG64 from SeedSequence([seed, GRAPH_STREAM])
so the graph's randomness never overlaps the persona sampling's, which uses the bare seed.
"""

from __future__ import annotations

import numpy as np

from worker_server.graphs.barabasi_albert import barabasi_albert
from worker_server.graphs.csr import Graph, canonical_keys, drop_repeats, from_keys, index_dtype
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
    """G(n, p): the edge count is Binomial(pairs, p), then that many distinct pairs uniformly.

    Sparse graphs draw ordered pairs and top up what repeats removed (a uniform subset of the
    pairs); dense ones (over a quarter of all pairs) pick pair ranks without replacement.
    """
    pairs = n * (n - 1) // 2
    if pairs == 0:
        return from_keys(n, np.empty(0, dtype=np.int64))
    p = min(mean_degree / (n - 1), 1.0)
    edges = int(rng.binomial(pairs, p))
    if edges > pairs // 4:
        ranks = np.sort(rng.choice(pairs, size=edges, replace=False))
        lo, hi = _unrank_pairs(ranks, n)
        return from_keys(n, lo * n + hi)
    keys = np.empty(0, dtype=np.int64)
    while keys.size < edges:
        need = edges - keys.size
        u = rng.integers(0, n, size=need, dtype=np.int64)
        v = rng.integers(0, n - 1, size=need, dtype=np.int64)
        v += v >= u  # uniform over the others: never a self-loop
        drawn = drop_repeats(np.sort(canonical_keys(u, v, n)))
        keys = _merge(keys, drawn[~_contains(keys, drawn)])
    return from_keys(n, keys)


def _merge(*sorted_runs: np.ndarray) -> np.ndarray:
    """One sorted array from sorted ones: numpy's stable sort (timsort) merges runs in linear
    time, where the default sort would start over."""
    return np.sort(np.concatenate(sorted_runs), kind="stable")


def _unrank_pairs(ranks: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Pair rank r (row-major over lo < hi) → (lo, hi); used only for small dense graphs."""
    lo, hi = np.triu_indices(n, k=1)
    return lo[ranks].astype(np.int64), hi[ranks].astype(np.int64)


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
