"""Seeded generators: determinism, simple symmetric CSR, and each kind's known degrees."""

from __future__ import annotations

import random

import numpy as np
import pytest

from worker_server.graphs.csr import Graph, check_simple, from_edges
from worker_server.graphs.generators import generate
from worker_server.graphs.spec import parse_graph_spec
from worker_server.graphs.stats import clustering_estimate, components

KINDS = [
    {"kind": "erdos_renyi", "mean_degree": 6},
    {"kind": "watts_strogatz", "k": 6, "p": 0.2},
    {"kind": "barabasi_albert", "m": 3},
    {"kind": "cliques", "size": 5},
]


def _graph(data: dict, size: int, seed: int = 11) -> Graph:
    graph = generate(parse_graph_spec(data), size, seed)
    assert graph is not None
    return graph


@pytest.mark.parametrize("data", KINDS, ids=lambda d: d["kind"])
def test_same_spec_size_and_seed_give_the_same_bytes(data):
    first, again = _graph(data, 2000), _graph(data, 2000)
    assert first.indptr.tobytes() == again.indptr.tobytes()
    assert first.indices.tobytes() == again.indices.tobytes()
    assert first.indptr.dtype == np.int64 and first.indices.dtype == np.int32


@pytest.mark.parametrize("data", KINDS[:3], ids=lambda d: d["kind"])
def test_another_seed_gives_another_graph(data):
    assert not np.array_equal(
        _graph(data, 2000, seed=1).indices, _graph(data, 2000, seed=2).indices
    )


@pytest.mark.parametrize("data", KINDS, ids=lambda d: d["kind"])
@pytest.mark.parametrize("size", [10, 2000])
def test_graphs_are_simple_and_symmetric(data, size):
    check_simple(_graph(data, size))  # raises on a self-loop, duplicate, unsorted row, asymmetry


def test_check_simple_catches_what_generators_must_not_make():
    good = from_edges(4, np.array([0, 1, 2]), np.array([1, 2, 3]))
    check_simple(good)
    one_way = Graph(4, good.indptr.copy(), good.indices.copy())
    one_way.indices[0] = 2  # row 0 now lists 2, row 2 does not list 0
    with pytest.raises(ValueError, match="not symmetric"):
        check_simple(one_way)
    looped = Graph(2, np.array([0, 1, 2]), np.array([0, 1], dtype=np.int32))
    with pytest.raises(ValueError, match="self-loop"):
        check_simple(looped)
    repeated = Graph(2, np.array([0, 2, 4]), np.array([1, 1, 0, 0], dtype=np.int32))
    with pytest.raises(ValueError, match="ascending"):
        check_simple(repeated)


def test_from_edges_drops_loops_and_repeats():
    graph = from_edges(3, np.array([0, 1, 1, 2, 2]), np.array([1, 0, 1, 0, 0]))
    assert graph.edges == 2
    assert graph.neighbours(0).tolist() == [1, 2]


def test_complete_stores_no_edges():
    assert generate(parse_graph_spec({"kind": "complete"}), 1000, 1) is None


def test_generation_refuses_a_spec_that_does_not_fit_the_size():
    with pytest.raises(ValueError, match="less than size"):
        generate(parse_graph_spec({"kind": "barabasi_albert", "m": 10}), 10, 1)


def test_erdos_renyi_mean_degree():
    n, c = 20_000, 8.0
    degree = _graph({"kind": "erdos_renyi", "mean_degree": c}, n).degrees()
    # edges ~ Binomial(pairs, p): sd of the mean degree is about sqrt(2c/n) = 0.028
    assert abs(degree.mean() - c) < 0.15
    assert abs(degree.var() - c) < 0.6  # Poisson degrees: variance ≈ mean


def test_erdos_renyi_dense_and_complete():
    n = 60
    graph = _graph({"kind": "erdos_renyi", "mean_degree": 50}, n)
    check_simple(graph)
    assert abs(graph.degrees().mean() - 50) < 2.5
    full = _graph({"kind": "erdos_renyi", "mean_degree": n - 1}, n)  # p = 1: every pair
    assert (full.degrees() == n - 1).all()


def test_erdos_renyi_edges_are_spread_over_all_pairs():
    # Pairs are numbered row by row (lo < hi); a wrong unranking would crowd some rows.
    n = 20_000
    degree = _graph({"kind": "erdos_renyi", "mean_degree": 8}, n).degrees()
    quarters = degree.reshape(4, -1).mean(axis=1)  # sd of each about 0.04
    assert np.all(np.abs(quarters - 8) < 0.25)


def test_watts_strogatz_ring_has_degree_k_and_rewiring_keeps_the_mean():
    n, k = 5000, 8
    ring = _graph({"kind": "watts_strogatz", "k": k, "p": 0}, n)
    assert (ring.degrees() == k).all()
    assert ring.neighbours(0).tolist() == [1, 2, 3, 4, n - 4, n - 3, n - 2, n - 1]
    rewired = _graph({"kind": "watts_strogatz", "k": k, "p": 0.3}, n)
    assert rewired.edges == n * k // 2
    assert rewired.degrees().mean() == k
    assert rewired.degrees().std() > 0.5  # some ends moved
    # clustering falls from 3(k-2)/(4(k-1)) = 0.643 by about (1 - p)^3 when rewired
    assert abs(clustering_estimate(ring, seed=1)["clustering"] - 0.643) < 0.03
    assert abs(clustering_estimate(rewired, seed=1)["clustering"] - 0.643 * 0.7**3) < 0.04


def test_watts_strogatz_near_complete_still_terminates_simple():
    graph = _graph({"kind": "watts_strogatz", "k": 8, "p": 1}, 9)  # complete: nowhere to go
    check_simple(graph)
    assert graph.edges == 36


def test_barabasi_albert_degrees():
    n, m = 20_000, 3
    graph = _graph({"kind": "barabasi_albert", "m": m}, n)
    degree = graph.degrees()
    assert graph.edges == m * (n - m)  # the star's m edges, then m per arrival
    assert abs(degree.mean() - 2 * m) < 0.01
    assert degree.min() == m
    # P(k = m) = 2 / (m + 2) for preferential attachment (0.4 at m = 3)
    assert abs(np.mean(degree == m) - 2 / (m + 2)) < 0.02
    assert degree.max() > 20 * m  # hubs: a power-law tail, unlike Erdős–Rényi
    assert components(graph) == 1


def test_barabasi_albert_small_sizes():
    assert _graph({"kind": "barabasi_albert", "m": 4}, 5).edges == 4  # the star alone
    tight = _graph({"kind": "barabasi_albert", "m": 5}, 12)
    check_simple(tight)
    assert tight.edges == 5 * 7
    # m close to the size: an arrival's last free target is one slot in 2m (multi-try redraws)
    crowded = _graph({"kind": "barabasi_albert", "m": 5000}, 5002)
    check_simple(crowded)
    assert crowded.edges == 5000 * 2
    assert crowded.degrees()[5001] == 5000


def test_cliques_are_exact_contiguous_blocks():
    graph = _graph({"kind": "cliques", "size": 4}, 12)
    assert (graph.degrees() == 3).all()
    assert graph.neighbours(0).tolist() == [1, 2, 3]
    assert graph.neighbours(5).tolist() == [4, 6, 7]
    assert graph.neighbours(11).tolist() == [8, 9, 10]
    assert components(graph) == 3


def _sequential_barabasi_albert_degrees(n: int, m: int, seed: int) -> np.ndarray:
    """networkx's process, arrival by arrival, as the reference for the vectorised one."""
    rng = random.Random(seed)
    degree = [m] + [1] * m + [0] * (n - m - 1)
    repeated = [0] * m + list(range(1, m + 1))
    for arrival in range(m + 1, n):
        targets: set[int] = set()
        while len(targets) < m:
            targets.add(rng.choice(repeated))
        for target in targets:
            degree[target] += 1
        degree[arrival] = m
        repeated.extend(targets)
        repeated.extend([arrival] * m)
    return np.array(degree)


def test_barabasi_albert_matches_the_sequential_process():
    n, m, seeds = 3000, 3, range(20)
    ours = [_graph({"kind": "barabasi_albert", "m": m}, n, seed).degrees() for seed in seeds]
    reference = [_sequential_barabasi_albert_degrees(n, m, seed) for seed in seeds]

    def share_at_m(degrees):
        return np.mean([np.mean(d == m) for d in degrees])

    def second_moment(degrees):  # weighs the hubs: sd of this mean over 20 seeds is about 1.2
        return np.mean([np.mean(d.astype(float) ** 2) for d in degrees])

    assert abs(share_at_m(ours) - share_at_m(reference)) < 0.01
    assert abs(second_moment(ours) / second_moment(reference) - 1) < 0.06
