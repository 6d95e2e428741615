"""Graph specs: each bad value is refused naming its field and the reason."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from worker_server.graphs.spec import (
    MAX_CLIQUE_SIZE,
    MAX_GRAPH_EDGES,
    check_for_size,
    expected_edges,
    parse_graph_spec,
    problems_for_size,
)


def _error(data: dict) -> dict:
    with pytest.raises(ValidationError) as caught:
        parse_graph_spec(data)
    return caught.value.errors()[0]


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        ({"kind": "erdos_renyi", "mean_degree": 0}, "mean_degree", "greater than 0"),
        ({"kind": "erdos_renyi", "mean_degree": float("nan")}, "mean_degree", "finite"),
        ({"kind": "watts_strogatz", "k": 3, "p": 0.1}, "k", "even"),
        ({"kind": "watts_strogatz", "k": 0, "p": 0.1}, "k", "greater than or equal to 2"),
        ({"kind": "watts_strogatz", "k": 4, "p": 1.5}, "p", "less than or equal to 1"),
        ({"kind": "watts_strogatz", "k": 4, "p": -0.1}, "p", "greater than or equal to 0"),
        ({"kind": "barabasi_albert", "m": 0}, "m", "greater than or equal to 1"),
        ({"kind": "cliques", "size": 1}, "size", "greater than or equal to 2"),
        ({"kind": "cliques", "size": MAX_CLIQUE_SIZE + 1}, "size", "less than or equal"),
        ({"kind": "edge_list", "upload": "../etc/passwd"}, "upload", "pattern"),
        ({"kind": "edge_list", "upload": "a.csv", "order": "random"}, "order", "sorted"),
    ],
)
def test_field_errors_name_the_field(data, field, words):
    error = _error(data)
    assert error["loc"][-1] == field
    assert words in error["msg"]


def test_unknown_keys_and_kinds_are_refused():
    assert _error({"kind": "complete", "extra": 1})["type"] == "extra_forbidden"
    assert _error({"kind": "lattice"})["type"] == "union_tag_invalid"


@pytest.mark.parametrize(
    ("data", "size", "field", "words"),
    [
        ({"kind": "erdos_renyi", "mean_degree": 100}, 100, "mean_degree", "at most size - 1 = 99"),
        # Near float's limit: refused by range, not overflowing the edge count (was a 500).
        ({"kind": "erdos_renyi", "mean_degree": 1.2e308}, 951_077, "mean_degree", "at most size"),
        ({"kind": "watts_strogatz", "k": 10, "p": 0.1}, 10, "k", "less than size 10"),
        ({"kind": "barabasi_albert", "m": 5}, 5, "m", "less than size 5"),
        ({"kind": "cliques", "size": 7}, 100, "size", "does not divide the population size 100"),
        ({"kind": "cliques", "size": 200}, 100, "size", "does not divide"),
    ],
)
def test_size_dependent_checks_name_the_field(data, size, field, words):
    spec = parse_graph_spec(data)
    with pytest.raises(ValidationError) as caught:
        check_for_size(spec, size)
    error = caught.value.errors()[0]
    assert error["loc"] == (field,)
    assert words in error["msg"]


def test_a_clique_size_that_does_not_divide_suggests_one_that_does():
    (problem,) = problems_for_size(parse_graph_spec({"kind": "cliques", "size": 7}), 100)
    assert "largest divisor below it: 5" in problem[1]


def test_the_edge_budget_bounds_memory():
    spec = parse_graph_spec({"kind": "erdos_renyi", "mean_degree": 30})
    (problem,) = problems_for_size(spec, 10_000_000)
    assert problem[0] == ("mean_degree",)
    assert f"{MAX_GRAPH_EDGES:,}" in problem[1] and "MiB" in problem[1]
    assert (
        problems_for_size(parse_graph_spec({"kind": "erdos_renyi", "mean_degree": 10}), 10**7) == []
    )


def test_expected_edges_per_kind():
    size = 1000
    assert expected_edges(parse_graph_spec({"kind": "complete"}), size) == 0
    assert expected_edges(parse_graph_spec({"kind": "erdos_renyi", "mean_degree": 4}), size) == 2000
    assert (
        expected_edges(parse_graph_spec({"kind": "watts_strogatz", "k": 6, "p": 0}), size) == 3000
    )
    assert expected_edges(parse_graph_spec({"kind": "barabasi_albert", "m": 3}), size) == 2991
    assert expected_edges(parse_graph_spec({"kind": "cliques", "size": 10}), size) == 4500


def test_valid_specs_pass_for_their_size():
    for data in (
        {"kind": "complete"},
        {"kind": "erdos_renyi", "mean_degree": 99},
        {"kind": "watts_strogatz", "k": 98, "p": 1},
        {"kind": "barabasi_albert", "m": 99},
        {"kind": "cliques", "size": 100},
    ):
        check_for_size(parse_graph_spec(data), 100)  # no error
        assert problems_for_size(parse_graph_spec(data), 100) == []
