"""The network layer's pieces on one process: placement checks, CSR gathers, which values each
peer is sent, deliveries and the peer credential. The exchange between real processes is in
tests/integration/test_network_rounds.py."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support_network_values import Hosted, network_round
from worker_server.graphs.generators import generate
from worker_server.graphs.spec import parse_graph_spec
from worker_server.rounds import pairing
from worker_server.rounds.errors import InvalidRound
from worker_server.rounds.network import (
    PEER_METHODS,
    NetworkStates,
    csr_gather,
    peer_credential,
    placement_from,
)
from worker_server.rpc import worker_pb2 as pb
from worker_server.rpc_auth import RpcSecretInterceptor


def ring(n: int):
    """A ring of n agents: i neighbours i - 1 and i + 1."""
    numbers = np.stack([(np.arange(n) - 1) % n, (np.arange(n) + 1) % n], axis=1)
    numbers.sort(axis=1)
    return np.arange(0, 2 * n + 1, 2, dtype=np.int64), numbers.reshape(-1).astype(np.int64)


def hosted(n: int, lo: int, hi: int) -> Hosted:
    offsets, numbers = ring(n)
    rows = np.arange(lo, hi)
    sub, at = csr_gather(offsets, rows)
    return Hosted("7", (np.int64(7) << 32) | rows, sub, numbers[at])


def view_of(states: NetworkStates, population: Hosted, round_number: int):
    state = states.prepare(population, "s1", round_number)
    return states.view(state, (population.population_id, "s1"), round_number)


def test_csr_gather_takes_any_rows():
    offsets = np.array([0, 2, 2, 5, 6])
    sub, at = csr_gather(offsets, np.array([3, 0, 2]))
    assert sub.tolist() == [0, 1, 3, 6]
    assert at.tolist() == [5, 0, 1, 2, 3, 4]


@pytest.mark.parametrize(
    "change, field",
    [
        (dict(starts=[1, 5]), "network.run_starts"),
        (dict(starts=[0, 5, 5]), "network.run_starts"),
        (dict(owners=[0, 2]), "network.run_owners"),
        (dict(size=0), "network.size"),
        (dict(me=3), "network.self"),
    ],
)
def test_a_bad_placement_is_refused_naming_the_field(change, field):
    given = dict(starts=[0, 5], owners=[0, 1], size=10, me=0)
    given.update(change)
    if "owners" not in change and len(given["starts"]) != 2:
        given["owners"] = [0] * len(given["starts"])
    with pytest.raises(InvalidRound, match=field):
        placement_from(network_round(given["starts"], given["owners"], given["size"], given["me"]))


def test_each_peer_is_sent_the_values_its_agents_neighbour():
    # Ring of 10 over two processes: 0..4 here, 5..9 on the peer. The peer's agents 5 and 9
    # neighbour 4 and 0.
    states = NetworkStates()
    population = hosted(10, 0, 5)
    placement = placement_from(network_round([0, 5], [0, 1], 10))
    view = view_of(states, population, 1)
    previous, streak, neighbours = view.observe(np.arange(5))
    assert np.isnan(previous).all() and (streak == 0).all()
    assert neighbours.numbers.tolist() == [1, 9, 0, 2, 1, 3, 2, 4, 3, 5]
    calls = view.record(np.arange(5), np.arange(5, dtype=float), placement)
    ((peer, request, full),) = calls
    assert peer.worker_id == 2 and full
    assert np.frombuffer(request.numbers, "<u4").tolist() == [0, 4]
    assert np.frombuffer(request.values, "<f8").tolist() == [0.0, 4.0]


def test_values_from_peers_reach_the_next_round_and_only_changes_are_sent():
    states = NetworkStates()
    population = hosted(10, 0, 5)
    placement = placement_from(network_round([0, 5], [0, 1], 10))
    view = view_of(states, population, 1)
    view.record(np.arange(5), np.zeros(5), placement)
    view.state.sent_full[2] = placement.token  # as the delivery does once the peer took it
    # The peer's round-1 values of its agents 5 and 9.
    states.take(
        pb.DeliverValuesRequest(
            simulation_id="s1",
            population_id="7",
            round=1,
            numbers=np.array([5, 9], "<u4").tobytes(),
            values=np.array([1.0, 2.0], "<f8").tobytes(),
        )
    )
    second = view_of(states, population, 2)
    previous, streak, neighbours = second.observe(np.array([0, 4]))
    assert previous.tolist() == [0.0, 0.0] and streak.tolist() == [1, 1]
    assert neighbours.numbers.tolist() == [1, 9, 3, 5]
    assert neighbours.values.tolist() == [0.0, 2.0, 0.0, 1.0]
    # Round 2: only agent 4 changes; the peer is sent just that.
    values = np.array([0.0, 0.0, 0.0, 0.0, 3.0])
    ((_, request, full),) = second.record(np.arange(5), values, placement)
    assert not full
    assert np.frombuffer(request.numbers, "<u4").tolist() == [4]
    third = view_of(states, population, 3)
    _, streak, _ = third.observe(np.arange(5))
    assert streak.tolist() == [2, 2, 2, 2, 1]


def test_a_new_placement_sends_everything_again():
    states = NetworkStates()
    population = hosted(10, 0, 5)
    first = placement_from(network_round([0, 5], [0, 1], 10, token="a"))
    view = view_of(states, population, 1)
    view.record(np.arange(5), np.zeros(5), first)
    view.state.sent_full[2] = first.token
    moved = placement_from(network_round([0, 5, 8], [0, 1, 1], 10, token="b"))
    calls = view_of(states, population, 2).record(np.arange(5), np.zeros(5), moved)
    ((_, request, full),) = calls
    assert full and np.frombuffer(request.numbers, "<u4").tolist() == [0, 4]


def test_a_later_round_without_state_here_is_refused():
    states = NetworkStates()
    with pytest.raises(InvalidRound, match="no values of round 2"):
        states.check(hosted(10, 0, 5), "s1", 3)


@pytest.mark.parametrize(
    "numbers, values, match",
    [
        (b"\x00\x00\x00", b"", "uint32"),
        (np.array([1], "<u4").tobytes(), b"\x00" * 7, "float64"),
        (np.array([1, 2], "<u4").tobytes(), np.array([1.0], "<f8").tobytes(), "one each"),
    ],
)
def test_a_malformed_delivery_is_refused(numbers, values, match):
    request = pb.DeliverValuesRequest(
        simulation_id="s", population_id="7", round=1, numbers=numbers, values=values
    )
    with pytest.raises(InvalidRound, match=match):
        NetworkStates().take(request)


def test_the_peer_credential_opens_the_peer_plane_only():
    secret = "s3cret"
    guard = RpcSecretInterceptor(secret, peer_credential(secret), PEER_METHODS)
    credential = peer_credential(secret)
    assert credential != secret
    for method in PEER_METHODS:
        assert guard.accepts(credential, method)
        assert guard.accepts(secret, method)
    for method in (
        "/populace.v1.WorkerService/DeleteAgents",
        "/populace.v1.WorkerService/RunRound",
    ):
        assert not guard.accepts(credential, method)
        assert guard.accepts(secret, method)
    assert not guard.accepts(peer_credential("another"), PEER_METHODS[0])


def test_agents_that_move_here_wait_for_their_seed_and_keep_everyone_elses_values():
    states = NetworkStates()
    placement = placement_from(network_round([0, 5], [0, 1], 10))
    view = view_of(states, hosted(10, 0, 5), 1)
    view.record(np.arange(5), np.arange(5, dtype=float), placement)
    # Agents 5 and 6 move here (their process was lost): a round 2 cannot start without them.
    bigger = hosted(10, 0, 7)
    with pytest.raises(InvalidRound, match="2 agents moved here have no values"):
        states.prepare(bigger, "s1", 2)
    seeded = states.seed(
        pb.SeedValuesRequest(
            simulation_id="s1",
            population_id="7",
            round=1,
            numbers=np.array([5, 6], "<u4").tobytes(),
            values=np.array([50.0, 60.0], "<f8").tobytes(),
            streaks=np.array([1, 1], "<i4").tobytes(),
        ),
        bigger,
    )
    assert seeded == 2
    state = states.prepare(bigger, "s1", 2)
    previous, streak, _ = states.view(state, ("7", "s1"), 2).observe(np.arange(7))
    assert previous.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 50.0, 60.0]
    assert streak.tolist() == [1] * 7
    # A peer asking for them now gets the seeded values; an agent not hosted here is refused.
    fetched, partners = states.fetch(
        pb.FetchValuesRequest(
            simulation_id="s1", population_id="7", round=1, numbers=np.array([6], "<u4").tobytes()
        )
    )
    assert fetched.tolist() == [60.0] and partners is None
    with pytest.raises(InvalidRound, match="not hosted here"):
        states.fetch(
            pb.FetchValuesRequest(
                simulation_id="s1",
                population_id="7",
                round=1,
                numbers=np.array([8], "<u4").tobytes(),
            )
        )


def test_a_seed_for_agents_not_hosted_here_is_refused():
    states = NetworkStates()
    request = pb.SeedValuesRequest(
        simulation_id="s1",
        population_id="7",
        round=1,
        numbers=np.array([9], "<u4").tobytes(),
        values=np.array([1.0], "<f8").tobytes(),
        streaks=np.array([1], "<i4").tobytes(),
    )
    with pytest.raises(InvalidRound, match="not hosted here"):
        states.seed(request, hosted(10, 0, 5))
    with pytest.raises(InvalidRound, match="population_id"):
        states.seed(request, None)


def test_a_deleted_population_takes_its_values_with_it():
    states = NetworkStates()
    placement = placement_from(network_round([0, 5], [0, 1], 10))
    view_of(states, hosted(10, 0, 5), 1).record(np.arange(5), np.zeros(5), placement)
    states.forget("8")  # another population: nothing changes
    states.check(hosted(10, 0, 5), "s1", 2)
    states.forget("7")
    with pytest.raises(InvalidRound, match="no values of round 1"):
        states.check(hosted(10, 0, 5), "s1", 2)


# -- pairs: a matching along edges across processes, random pairs of a complete graph ------------


def two_processes(size: int, cut: int, complete: bool = False, graph=None):
    """Two processes' states, hosts of 0..cut-1 and cut..size-1, and their placements."""
    made = []
    for me, (lo, hi) in enumerate(((0, cut), (cut, size))):
        rows = np.arange(lo, hi)
        if complete:
            population = Hosted(
                "7",
                (np.int64(7) << 32) | rows,
                np.zeros(hi - lo + 1, dtype=np.int64),
                np.empty(0, dtype=np.int64),
                has_graph=False,
            )
        else:
            sub, at = csr_gather(graph.indptr, rows)
            population = Hosted("7", (np.int64(7) << 32) | rows, sub, np.asarray(graph.indices)[at])
        message = network_round([0, cut], [0, 1], size, me=me)
        message.complete = complete
        made.append((NetworkStates(), population, placement_from(message)))
    return made


def play_pairs(processes, values: np.ndarray, seed: int, complete_size: int = 0):
    """Round 1 with these values on both processes, their deliveries exchanged, then each
    process's round-2 partners (numbers and values), in agent order."""
    key = ("7", "s1")
    sent = []
    for states, population, placement in processes:
        state = states.prepare(population, "s1", 1, complete_size)
        view = states.view(state, key, 1, (seed,))
        rows = np.arange(len(population))
        assert (view.partners(rows).numbers == pairing.NONE).all()  # nobody in round 1
        numbers = population.ids & 0xFFFFFFFF
        sent.append(view.record(rows, values[numbers], placement))
    for (states, _, _), calls in zip(reversed(processes), sent, strict=True):
        for _, request, _ in calls:
            states.take(request)
    partners, partner_values = [], []
    for states, population, _ in processes:
        state = states.prepare(population, "s1", 2, complete_size)
        view = states.view(state, key, 2, (seed,))
        got = view.partners(np.arange(len(population)))
        partners.append(got.numbers)
        partner_values.append(got.values)
    return np.concatenate(partners), np.concatenate(partner_values), sent


def test_processes_pair_agents_along_edges_as_the_whole_graph_does():
    graph = generate(parse_graph_spec({"kind": "erdos_renyi", "mean_degree": 4}), 400, 2)
    values = np.random.default_rng(0).random(400)
    partners, partner_values, sent = play_pairs(two_processes(400, 170, graph=graph), values, 9)
    want = pairing.graph_matching(9, 2, graph.indptr, graph.indices)
    assert np.array_equal(partners, want)
    paired = want >= 0
    assert paired.mean() > 0.3
    assert np.array_equal(partner_values[paired], values[want[paired]])
    assert np.isnan(partner_values[~paired]).all()
    # Each process offered the other exactly its agents whose top partner is hosted there.
    tops = pairing.top_partners(9, 2, np.arange(400), graph.indptr, graph.indices)
    ((_, request, _),) = sent[0]
    offered = np.frombuffer(request.offered, "<u4")
    assert np.array_equal(offered, np.flatnonzero(tops[:170] >= 170))
    assert np.array_equal(np.frombuffer(request.offered_to, "<u4"), tops[offered])


def test_a_fetch_with_pairing_gives_the_agents_top_partners_of_the_next_round():
    graph = generate(parse_graph_spec({"kind": "watts_strogatz", "k": 4, "p": 0.3}), 100, 2)
    (states, population, placement), _ = two_processes(100, 50, graph=graph)
    view = states.view(states.prepare(population, "s1", 1), ("7", "s1"), 1, (5,))
    view.record(np.arange(50), np.zeros(50), placement)
    _, partners = states.fetch(
        pb.FetchValuesRequest(
            simulation_id="s1",
            population_id="7",
            round=1,
            numbers=np.array([3, 49], "<u4").tobytes(),
            pairing=True,
            seed=5,
        )
    )
    tops = pairing.top_partners(5, 2, np.arange(100), graph.indptr, graph.indices)
    assert partners.tolist() == tops[[3, 49]].tolist()


def test_a_complete_graph_keeps_every_value_and_pairs_the_whole_population():
    size = 61
    values = np.random.default_rng(1).random(size)
    processes = two_processes(size, 25, complete=True)
    partners, partner_values, sent = play_pairs(processes, values, 4, complete_size=size)
    want = pairing.complete_pairs(4, 2, np.arange(size), size)
    assert np.array_equal(partners, want)
    paired = want >= 0
    assert int((~paired).sum()) == 1
    assert np.array_equal(partner_values[paired], values[want[paired]])
    # Round 1: every agent's value went to the other process, and no offers (pairs are known).
    ((_, request, full),) = sent[0]
    assert full and np.frombuffer(request.numbers, "<u4").tolist() == list(range(25))
    assert request.offered == b""
    # Neighbours are not listed on a complete graph.
    states, population, _ = processes[0]
    view = states.view(states.prepare(population, "s1", 2, size), ("7", "s1"), 2)
    previous, _, neighbours = view.observe(np.arange(3))
    assert neighbours is None and previous.tolist() == values[:3].tolist()


def test_a_complete_graph_agent_seeded_before_its_first_round_here_keeps_its_value():
    size = 20
    (states, population, _), _ = two_processes(size, 10, complete=True)
    states.seed(
        pb.SeedValuesRequest(
            simulation_id="s1",
            population_id="7",
            round=3,
            numbers=np.arange(10, dtype="<u4").tobytes(),
            values=np.linspace(0, 0.9, 10).astype("<f8").tobytes(),
            streaks=np.ones(10, dtype="<i4").tobytes(),
        ),
        population,
    )
    state = states.prepare(population, "s1", 4, size)  # the table now spans the population
    assert len(state.layout.keys) == size
    previous, _, _ = states.view(state, ("7", "s1"), 4).observe(np.arange(10))
    assert previous.tolist() == np.linspace(0, 0.9, 10).tolist()


def test_a_population_without_a_graph_plays_only_a_complete_graph():
    bare = Hosted("7", np.arange(3), np.zeros(4, dtype=np.int64), np.empty(0), has_graph=False)
    with pytest.raises(InvalidRound, match="has no graph here"):
        NetworkStates().check(bare, "s1", 1)
    NetworkStates().check(bare, "s1", 1, complete=True)
