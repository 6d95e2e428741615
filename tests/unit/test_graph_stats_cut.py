"""Degree statistics, components, clustering and the cut fraction, against small known graphs
and brute force."""

from __future__ import annotations

import numpy as np
import pytest

from worker_server.graphs.csr import from_edges
from worker_server.graphs.cut import complete_cut_fraction, cut_edges, cut_fraction, even_bounds
from worker_server.graphs.generators import generate
from worker_server.graphs.spec import parse_graph_spec
from worker_server.graphs.stats import (
    clustering_estimate,
    component_labels,
    components,
    degree_histogram,
    degree_stats,
    has_edges,
)


def _path(n: int):
    return from_edges(n, np.arange(n - 1), np.arange(1, n))


def test_degree_stats_and_histogram():
    star = from_edges(6, np.zeros(4, dtype=np.int64), np.arange(1, 5))  # agent 5 alone
    assert degree_stats(star) == {
        "nodes": 6,
        "edges": 4,
        "mean_degree": 8 / 6,
        "min_degree": 0,
        "max_degree": 4,
        "isolated": 1,
    }
    assert degree_histogram(star) == [1, 4, 0, 1]  # 0 | 1 | 2-3 | 4-7


def test_components_count_and_labels():
    # a path 0-1-2 (built high to low so hooking must follow several hops), a pair, two alone
    graph = from_edges(7, np.array([2, 1, 4]), np.array([1, 0, 5]))
    assert component_labels(graph).tolist() == [0, 0, 0, 3, 4, 4, 6]
    assert components(graph) == 4
    assert components(_path(5000)) == 1
    cliques = generate(parse_graph_spec({"kind": "cliques", "size": 5}), 1000, 0)
    assert components(cliques) == 200


def test_has_edges_matches_the_rows():
    graph = generate(parse_graph_spec({"kind": "erdos_renyi", "mean_degree": 5}), 300, 2)
    rng = np.random.default_rng(0)
    u, v = rng.integers(0, 300, 2000), rng.integers(0, 300, 2000)
    expected = [int(b) in set(graph.neighbours(a).tolist()) for a, b in zip(u, v, strict=True)]
    assert has_edges(graph, u, v).tolist() == expected


def test_clustering_estimate_on_known_graphs():
    cliques = generate(parse_graph_spec({"kind": "cliques", "size": 4}), 400, 0)
    assert clustering_estimate(cliques)["clustering"] == 1.0
    assert clustering_estimate(_path(100))["clustering"] == 0.0
    assert clustering_estimate(from_edges(4, np.array([0, 2]), np.array([1, 3]))) is None


def _brute_cut(graph, bounds) -> int:
    part = np.searchsorted(bounds, np.arange(graph.nodes), side="right") - 1
    return sum(
        1
        for a in range(graph.nodes)
        for b in graph.neighbours(a).tolist()
        if a < b and part[a] != part[b]
    )


@pytest.mark.parametrize("parts", [1, 2, 3, 7])
def test_cut_fraction_matches_brute_force(parts):
    graph = generate(parse_graph_spec({"kind": "erdos_renyi", "mean_degree": 4}), 500, 3)
    bounds = even_bounds(500, parts)
    assert cut_edges(graph, bounds) == _brute_cut(graph, bounds)
    assert cut_fraction(graph, bounds) == _brute_cut(graph, bounds) / graph.edges


def test_contiguous_structure_cuts_few_edges():
    ring = generate(parse_graph_spec({"kind": "watts_strogatz", "k": 4, "p": 0}), 1000, 0)
    assert cut_edges(ring, even_bounds(1000, 2)) == 6  # 3 edges span each of the 2 seams
    cliques = generate(parse_graph_spec({"kind": "cliques", "size": 10}), 1000, 0)
    assert cut_fraction(cliques, even_bounds(1000, 4)) == 0.0  # seams at multiples of 10...
    assert cut_fraction(cliques, [0, 255, 1000]) > 0  # ...but a seam inside a clique cuts


def test_even_bounds_and_bad_bounds():
    assert even_bounds(10, 3).tolist() == [0, 4, 7, 10]
    with pytest.raises(ValueError, match="parts must be at least 1"):
        even_bounds(10, 0)
    graph = _path(10)
    with pytest.raises(ValueError, match="bounds must rise from 0 to 10"):
        cut_fraction(graph, [0, 5, 9])


def test_complete_cut_fraction():
    assert complete_cut_fraction(4, [0, 2, 4]) == pytest.approx(4 / 6)
    assert complete_cut_fraction(100, [0, 100]) == 0.0
