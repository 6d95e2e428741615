"""The runtime's pairs for simulations that pair agents (Observation.partners): a random
matching along a graph's edges and random pairs over a complete graph. Each is a matching (no
agent twice, symmetric), only along edges, drawn afresh each round, deterministic, and the
same however the agents are split over processes or cohorts."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support_network import bounds_of
from worker_server.graphs.generators import generate
from worker_server.graphs.spec import parse_graph_spec
from worker_server.rounds import pairing


@pytest.fixture(scope="module")
def small_world():
    return generate(parse_graph_spec({"kind": "watts_strogatz", "k": 6, "p": 0.2}), 2000, 3)


def assert_matching(partner: np.ndarray) -> None:
    numbers = np.arange(len(partner))
    paired = partner >= 0
    assert np.all(partner[paired] != numbers[paired]), "nobody meets itself"
    assert np.array_equal(partner[partner[paired]], numbers[paired]), "u meets v iff v meets u"
    # Symmetric and a function: so no agent is in two pairs.
    assert len(np.unique(partner[paired])) == int(paired.sum())


def edge_set(graph) -> set[tuple[int, int]]:
    owner = np.repeat(np.arange(graph.nodes), np.diff(graph.indptr))
    return set(zip(owner.tolist(), np.asarray(graph.indices).tolist(), strict=True))


def test_the_graph_matching_is_a_matching_along_edges_drawn_afresh_each_round(small_world):
    edges = edge_set(small_world)
    rounds = [pairing.graph_matching(7, r, small_world.indptr, small_world.indices) for r in (2, 3)]
    for partner in rounds:
        assert_matching(partner)
        paired = np.flatnonzero(partner >= 0)
        assert all(
            (u, v) in edges for u, v in zip(paired.tolist(), partner[paired].tolist(), strict=True)
        )
        # A locally dominant matching of random priorities pairs about half the agents.
        assert 0.3 < len(paired) / len(partner) < 0.7
    assert not np.array_equal(*rounds)
    again = pairing.graph_matching(7, 2, small_world.indptr, small_world.indices)
    assert np.array_equal(rounds[0], again)
    other_seed = pairing.graph_matching(8, 2, small_world.indptr, small_world.indices)
    assert not np.array_equal(rounds[0], other_seed)


def test_an_edge_has_the_same_priority_from_both_ends():
    u = np.array([3, 10, 0, 5])
    v = np.array([10, 3, 5, 0])
    priority = pairing.edge_priorities(1, 4, u, v)
    assert priority[0] == priority[1] and priority[2] == priority[3]
    assert priority[0] != priority[2]


@pytest.mark.parametrize("parts", [1, 2, 5])
def test_processes_holding_parts_of_the_graph_find_the_same_matching(small_world, parts):
    """What each process does: its agents' top partners from its own rows, then whether each
    top partner's own top (computed by whoever hosts it) comes back."""
    whole = pairing.graph_matching(7, 2, small_world.indptr, small_world.indices)
    # Agents dealt out of order, as a re-placement may leave them.
    order = np.random.default_rng(1).permutation(small_world.nodes)
    tops = np.full(small_world.nodes, pairing.NONE)
    hosts = np.array_split(order, parts)
    for hosted in hosts:
        hosted = np.sort(hosted)
        rows = [
            small_world.indices[small_world.indptr[a] : small_world.indptr[a + 1]] for a in hosted
        ]
        offsets = np.cumsum([0, *map(len, rows)])
        tops[hosted] = pairing.top_partners(7, 2, hosted, offsets, np.concatenate(rows))
    for hosted in hosts:
        mine = tops[hosted]
        tops_of_tops = np.where(mine >= 0, tops[np.maximum(mine, 0)], pairing.NONE)
        assert np.array_equal(pairing.matched(hosted, mine, tops_of_tops), whole[hosted])


def test_an_isolated_agent_and_an_empty_graph_pair_nobody():
    offsets = np.array([0, 1, 2, 2])  # 0 - 1, and 2 alone
    partner = pairing.graph_matching(1, 2, offsets, np.array([1, 0]))
    assert partner.tolist() == [1, 0, -1]
    assert pairing.graph_matching(1, 2, np.zeros(4, dtype=np.int64), np.empty(0)).tolist() == [
        -1,
        -1,
        -1,
    ]


@pytest.mark.parametrize("size", [2, 3, 17, 1000, 1001])
def test_random_pairs_of_a_complete_graph_pair_everyone_but_one_of_an_odd_count(size):
    numbers = np.arange(size)
    partner = pairing.complete_pairs(5, 2, numbers, size)
    assert_matching(partner)
    assert int((partner < 0).sum()) == size % 2
    # Any agent's partner from its number alone: asked in cohorts, the same answer.
    parts = [pairing.complete_pairs(5, 2, numbers[a:b], size) for a, b in bounds_of(size, 3)]
    assert np.array_equal(np.concatenate(parts), partner)


def test_random_pairs_change_each_round_and_look_random():
    size = 1000
    numbers = np.arange(size)
    rounds = [pairing.complete_pairs(5, r, numbers, size) for r in range(2, 42)]
    assert all(not np.array_equal(a, b) for a, b in zip(rounds, rounds[1:], strict=False))
    # Nothing like a fixed offset between partners (an affine permutation would give one).
    offsets = (rounds[0] - numbers) % size
    assert len(np.unique(offsets)) > size // 4
    # Over 40 rounds an agent meets about 40 different partners.
    met = np.stack(rounds)
    assert np.mean([len(np.unique(met[:, a])) for a in range(0, size, 50)]) > 38
