"""Neighbours read without gathering every entry (worker_server/rounds/neighbour_values.py):
count_of and values_at give exactly what the gathered values give, for any cohort of a
process's rows, on a real generated graph split over two processes."""

from __future__ import annotations

import numpy as np
import pytest

from populace.plugin import Neighbours
from tests.support_network_values import Hosted, network_round
from worker_server.graphs.generators import generate
from worker_server.graphs.spec import parse_graph_spec
from worker_server.rounds.network import NetworkStates, csr_gather, placement_from
from worker_server.rpc import worker_pb2 as pb

SIZE = 400


def second_round_view(seed: int):
    """Process 0's view of round 2 (agents 0..SIZE/2-1 here, the rest on a peer that delivered
    its round-1 values), with every agent's round-1 value drawn from {0, 1, 2, NaN}."""
    graph = generate(parse_graph_spec({"kind": "erdos_renyi", "mean_degree": 6}), SIZE, seed)
    rows = np.arange(SIZE // 2)
    sub, at = csr_gather(graph.indptr, rows)
    population = Hosted("7", (np.int64(7) << 32) | rows, sub, np.asarray(graph.indices)[at])
    values = np.random.default_rng(seed).choice([0.0, 1.0, 2.0, np.nan], SIZE)
    states = NetworkStates()
    placement = placement_from(network_round([0, SIZE // 2], [0, 1], SIZE))
    first = states.view(states.prepare(population, "s1", 1), ("7", "s1"), 1)
    first.record(rows, values[rows], placement)
    peer = np.arange(SIZE // 2, SIZE)
    states.take(
        pb.DeliverValuesRequest(
            simulation_id="s1",
            population_id="7",
            round=1,
            numbers=peer.astype("<u4").tobytes(),
            values=values[peer].astype("<f8").tobytes(),
        )
    )
    return states.view(states.prepare(population, "s1", 2), ("7", "s1"), 2), graph, values


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("cohort", ["all", "a slice", "scattered rows"])
def test_counts_and_picks_match_the_gathered_values(seed, cohort):
    view, graph, values = second_round_view(seed)
    rows = {
        "all": np.arange(SIZE // 2),
        "a slice": np.arange(37, 120),
        "scattered rows": np.array([3, 150, 7, 99, 42]),
    }[cohort]
    _, _, neighbours = view.observe(rows)
    # The values the graph says each row's neighbours hold, gathered by hand.
    expected_values = np.concatenate(
        [values[graph.indices[graph.indptr[r] : graph.indptr[r + 1]]] for r in rows]
    )
    lazy_counts = {v: neighbours.count_of(v) for v in (0.0, 1.0, 2.0, 5.0)}
    picks = neighbours.pick(np.random.default_rng(seed).random(len(rows)))
    lazy_picked = neighbours.values_at(picks)
    # Only now is every entry gathered: counts and picks came without it.
    assert neighbours._values is None
    np.testing.assert_array_equal(neighbours.values, expected_values)
    for value, counts in lazy_counts.items():
        np.testing.assert_array_equal(counts, neighbours.count(neighbours.values == value))
    assert lazy_counts[1.0].sum() == (expected_values == 1.0).sum() > 0
    gathered = np.where(picks >= 0, neighbours.values[np.maximum(picks, 0)], np.nan)
    np.testing.assert_array_equal(lazy_picked, gathered)


def test_a_plugins_own_neighbours_count_the_values_given():
    neighbours = Neighbours(
        offsets=np.array([0, 2, 2, 5]),
        numbers=np.array([1, 2, 0, 1, 3]),
        values=np.array([1.0, 0.0, 1.0, 1.0, np.nan]),
    )
    assert neighbours.count_of(1.0).tolist() == [1, 0, 2]
    picked = neighbours.values_at(np.array([2, -1, 0]))
    assert picked[0] == 1.0 and np.isnan(picked[1]) and picked[2] == 1.0


def test_neighbours_need_values_or_a_source():
    with pytest.raises(ValueError, match="values, or a source"):
        Neighbours(offsets=np.array([0]), numbers=np.array([], dtype=np.int64))


def test_each_peers_keys_are_found_by_the_placements_runs():
    # Process 0 hosts agents 0..199; two peers host the rest in three runs, one peer twice.
    view, _, _ = second_round_view(4)
    layout = view.state.layout
    placement = placement_from(network_round([0, 200, 260, 330], [0, 1, 2, 1], SIZE, me=0, peers=3))
    owner = placement.owner_of(layout.keys)
    own = np.zeros(len(layout.keys), dtype=bool)
    own[layout.own_at] = True
    expected = {
        p: np.flatnonzero((owner == p) & ~own) for p in (1, 2) if ((owner == p) & ~own).any()
    }
    found = layout.receives_for(placement)
    assert found.keys() == expected.keys() and len(found) == 2
    for peer, keys in expected.items():
        np.testing.assert_array_equal(found[peer], keys)
