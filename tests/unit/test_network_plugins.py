"""The built-in network plugins `sir`, `voter` and `bounded_confidence`: their params name the
field they refuse, their rules on hand-made observations, their metrics and stop rules, the
analytic results they must reproduce (SIR final size, voter exit probability, HK consensus), and
that their values depend on the seed alone: not on the cohorts the population is split into."""

from __future__ import annotations

import math
import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from populace.builtins.bounded_confidence import (
    Averaging,
    BoundedConfidence,
    BoundedConfidenceParams,
)
from populace.builtins.sir import INFECTIOUS as I
from populace.builtins.sir import RECOVERED as R
from populace.builtins.sir import SUSCEPTIBLE as S
from populace.builtins.sir import Contagion, Sir, SirParams
from populace.builtins.voter import CopyANeighbour, Voter, VoterParams
from populace.plugin import VALID, Neighbours, Observation, Params, Partners, RoundActions
from populace.registry import GROUP, load_registry
from tests.support_network import CompleteGraph, graph_csr, play
from worker_server.graphs.generators import generate
from worker_server.graphs.spec import parse_graph_spec

ROOT = Path(__file__).resolve().parents[2]
NETWORK_PLUGINS = {"sir": Sir, "voter": Voter, "bounded_confidence": BoundedConfidence}


def graph(spec: dict, size: int, seed: int = 1):
    return generate(parse_graph_spec(spec), size, seed)


def path_graph(n: int):
    """0 - 1 - ... - n-1."""
    rows = [[j for j in (i - 1, i + 1) if 0 <= j < n] for i in range(n)]
    indptr = np.cumsum([0, *map(len, rows)])
    return graph_csr(indptr, np.array([j for row in rows for j in row], dtype=np.int32))


def isolated(n: int):
    return graph_csr(np.zeros(n + 1, dtype=np.int64), np.empty(0, dtype=np.int32))


def observation(previous, offsets, numbers, streak=None, round_number=2, uniforms=None):
    """A hand-made cohort of agents 0..n-1 of population 1, seeing `previous`."""
    previous = np.asarray(previous, dtype=np.float64)
    numbers = np.asarray(numbers, dtype=np.int64)
    n = len(previous)
    draws = np.zeros(n) if uniforms is None else np.asarray(uniforms, dtype=np.float64)
    return Observation(
        round=round_number,
        agent_ids=(1 << 32) | np.arange(n, dtype=np.int64),
        feedback={},
        group={},
        attributes={},
        uniforms=lambda stream: draws,
        previous=previous,
        streak=np.ones(n, dtype=np.int64) if streak is None else np.asarray(streak),
        neighbours=Neighbours(
            offsets=np.asarray(offsets, dtype=np.int64), numbers=numbers, values=previous[numbers]
        ),
        population_size=n,
        chosen=lambda count, stream: np.arange(n) < count,
    )


# -- declarations and registration ---------------------------------------------------------------


def test_the_three_are_registered_in_pyproject_and_load_as_network_plugins():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    points = {
        name: target
        for name, target in declared[GROUP].items()
        if name in NETWORK_PLUGINS  # the others are tested elsewhere
    }
    assert set(points) == set(NETWORK_PLUGINS)
    registry = load_registry([EntryPoint(n, t, GROUP) for n, t in points.items()])
    assert registry.broken == {}
    for name, cls in NETWORK_PLUGINS.items():
        plugin = registry.get(name)
        assert isinstance(plugin.simulation, cls) and cls.network
        described = plugin.describe()
        rule_based = [p["name"] for p in described["policies"] if not p["uses_llm"]]
        assert rule_based == [cls.default_policy]
    # Only bounded confidence has an LLM variant.
    llm = {
        n for n in NETWORK_PLUGINS for p in registry.get(n).describe()["policies"] if p["uses_llm"]
    }
    assert llm == {"bounded_confidence"}
    assert registry.get("sir").describe()["action"] == {
        "kind": "choice",
        "options": ["S", "I", "R"],
    }
    assert registry.get("voter").describe()["action"] == {"kind": "integer", "low": 0, "high": 1}
    assert registry.get("bounded_confidence").describe()["action"]["kind"] == "number"


@pytest.mark.parametrize(
    ("model", "data", "field"),
    [
        (SirParams, {"transmission": 1.5}, "transmission"),
        (SirParams, {"transmission": math.nan}, "transmission"),
        (SirParams, {"initial_infected": 0}, "initial_infected"),
        (SirParams, {"infectious_rounds": 0}, "infectious_rounds"),
        (SirParams, {"recovery": 0.1}, "recovery"),
        (VoterParams, {"initial_share": -0.1}, "initial_share"),
        (VoterParams, {"initial_share": 1.01}, "initial_share"),
        (BoundedConfidenceParams, {"model": "voter"}, "model"),
        (BoundedConfidenceParams, {"model": "deffuant", "mu": 0}, "mu"),
        (BoundedConfidenceParams, {"model": "deffuant", "mu": 0.6}, "mu"),
        (BoundedConfidenceParams, {"mu": math.nan}, "mu"),
        (BoundedConfidenceParams, {"epsilon": 0}, "epsilon"),
        (BoundedConfidenceParams, {"epsilon": 1.5}, "epsilon"),
        (BoundedConfidenceParams, {"tolerance": 0}, "tolerance"),
    ],
)
def test_params_name_the_field_they_refuse(model, data, field):
    with pytest.raises(ValidationError) as caught:
        model.model_validate(data)
    assert [e["loc"] for e in caught.value.errors()] == [(field,)]


def test_more_initially_infected_than_agents_fails_the_round_saying_so():
    with pytest.raises(ValueError, match=r"initial_infected \(6\) is more than the population"):
        play(Sir(), SirParams(initial_infected=6), None, path_graph(5), seed=1, rounds=1)


def test_a_population_without_a_graph_is_refused_after_round_one():
    seen = observation([0.0, 1.0], [0, 0, 0], [])
    bare = Observation(**{**seen.__dict__, "neighbours": None})
    with pytest.raises(ValueError, match="needs a population with a graph"):
        Contagion().decide(SirParams(), Params(), bare)


# -- the rules, on hand-made observations -------------------------------------------------------


def test_sir_infects_from_infectious_neighbours_recovers_after_its_rounds_and_stays_immune():
    # 0 susceptible next to a recovered agent only; 1 susceptible next to one infectious agent
    # (a draw of 0.49 < 0.5 infects it); 2 infectious for 1 of its 2 rounds, 3 for both: it
    # recovers; 4 recovered stays so.
    previous = [S, S, I, I, R]
    offsets = [0, 1, 3, 4, 5, 6]
    numbers = [4, 2, 4, 1, 2, 3]  # 0-4, 1-2, 1-4, 2-1, 3-2, 4-3 (values only matter here)
    params = SirParams(transmission=0.5, infectious_rounds=2)
    seen = observation(previous, offsets, numbers, streak=[3, 3, 1, 2, 5], uniforms=[0.49] * 5)
    assert Contagion().decide(params, Params(), seen).tolist() == [S, I, I, R, R]
    # Two infectious neighbours: 1 - 0.5^2 = 0.75.
    two = observation([S, I, I], [0, 2, 2, 2], [1, 2], uniforms=[0.74, 0.9, 0.9])
    assert Contagion().decide(SirParams(transmission=0.5), Params(), two)[0] == I
    two = observation([S, I, I], [0, 2, 2, 2], [1, 2], uniforms=[0.76, 0.9, 0.9])
    assert Contagion().decide(SirParams(transmission=0.5), Params(), two)[0] == S


def test_voter_copies_the_picked_neighbour_and_an_isolated_agent_keeps_its_opinion():
    # 0 neighbours 1 and 2; 1 neighbours 0; 2 neighbours 0; 3 has none.
    previous = [0.0, 1.0, 0.0, 1.0]
    seen = observation(previous, [0, 2, 3, 4, 4], [1, 2, 0, 0], uniforms=[0.2, 0.5, 0.5, 0.5])
    assert CopyANeighbour().decide(VoterParams(), Params(), seen).tolist() == [1, 0, 0, 1]
    seen = observation(previous, [0, 2, 3, 4, 4], [1, 2, 0, 0], uniforms=[0.7, 0.5, 0.5, 0.5])
    assert CopyANeighbour().decide(VoterParams(), Params(), seen).tolist() == [0, 0, 0, 1]


def test_hegselmann_krause_averages_the_opinions_within_epsilon_its_own_included():
    # A complete graph of three: 0.1 and 0.15 trust each other, 0.9 trusts nobody.
    offsets, numbers = [0, 2, 4, 6], [1, 2, 0, 2, 0, 1]
    seen = observation([0.1, 0.15, 0.9], offsets, numbers)
    moved = Averaging().decide(BoundedConfidenceParams(epsilon=0.1), Params(), seen)
    assert moved.tolist() == pytest.approx([0.125, 0.125, 0.9])
    assert moved[2] == 0.9  # nobody within epsilon: exactly where it was
    # A move within the tolerance is not made: the agent keeps its opinion bit for bit.
    seen = observation([0.5, 0.5 + 1e-7, 0.9], offsets, numbers)
    kept = Averaging().decide(BoundedConfidenceParams(epsilon=0.1), Params(), seen)
    assert kept.tolist() == [0.5, 0.5 + 1e-7, 0.9]


# -- metrics and stop rules ----------------------------------------------------------------------


def test_sir_on_a_path_with_certain_transmission_infects_one_hop_a_round():
    played = play(Sir(), SirParams(transmission=1, initial_infected=1), None, path_graph(7), 1, 50)
    first = played.metrics[0]
    assert first == {
        "susceptible": 6,
        "infectious": 1,
        "recovered": 0,
        "new_infections": 1,
        "attack_rate": 1 / 7,
        "n_invalid": 0,
    }
    for before, after in zip(played.metrics, played.metrics[1:], strict=False):
        assert after["susceptible"] + after["infectious"] + after["recovered"] == 7
        assert after["new_infections"] == before["susceptible"] - after["susceptible"]
        assert after["new_infections"] <= 2
    assert played.metrics[-1]["attack_rate"] == 1 and played.metrics[-1]["recovered"] == 7
    assert played.stopped == "no agent is infectious"
    assert played.metrics[-2]["infectious"] > 0


def test_sir_agents_stay_infectious_for_exactly_their_rounds():
    played = play(
        Sir(), SirParams(initial_infected=2, infectious_rounds=3), None, isolated(4), 1, 10
    )
    assert [m["infectious"] for m in played.metrics] == [2, 2, 2, 0]
    assert [m["recovered"] for m in played.metrics] == [0, 0, 0, 2]
    assert played.stopped == "no agent is infectious" and played.rounds == 4


def test_voter_counts_groups_and_stops_when_every_group_is_unanimous():
    played = play(Voter(), VoterParams(initial_share=0.5), None, isolated(6), 1, 10)
    # Isolated agents are groups of one, unanimous from the start.
    assert played.metrics == [
        {"share_ones": 0.5, "groups": 6, "groups_at_consensus": 6, "n_invalid": 0}
    ]
    assert played.stopped == "every group is unanimous"
    actions = RoundActions(
        round=3,
        agent_ids=np.arange(4),
        values=np.array([1.0, 1.0, 0.0, 1.0]),
        status=np.full(4, VALID, dtype=np.uint8),
        groups=np.array([0, 0, 1, 1]),
    )
    assert Voter().resolve(VoterParams(), actions).metrics == {
        "share_ones": 0.75,
        "groups": 2,
        "groups_at_consensus": 1,
        "n_invalid": 0,
    }


def test_bounded_confidence_metrics_and_clusters():
    values = np.array([0.1, 0.15, 0.5, 0.52, 0.9, math.nan])
    status = np.array([VALID] * 5 + [1], dtype=np.uint8)
    actions = RoundActions(round=2, agent_ids=np.arange(6), values=values, status=status)
    metrics = BoundedConfidence().resolve(BoundedConfidenceParams(epsilon=0.1), actions).metrics
    assert metrics["mean"] == pytest.approx(0.434)
    assert metrics["spread"] == pytest.approx(0.8)
    assert metrics["std"] == pytest.approx(float(np.std(values[:5])))
    assert metrics["clusters"] == 3 and metrics["n_invalid"] == 1


# -- known results -------------------------------------------------------------------------------


def final_size(ct: float) -> float:
    """The root a > 0 of a = 1 - exp(-ct * a) (the giant outbreak's share), by iteration."""
    a = 1.0
    for _ in range(200):
        a = 1 - math.exp(-ct * a)
    return a


@pytest.mark.parametrize(("degree", "transmission"), [(4, 0.5), (5, 0.3)])
def test_sir_final_size_on_erdos_renyi_matches_theory(degree, transmission):
    expected = final_size(degree * transmission)
    assert expected == pytest.approx({2.0: 0.797, 1.5: 0.583}[degree * transmission], abs=1e-3)
    population = graph({"kind": "erdos_renyi", "mean_degree": degree}, 100_000, seed=7)
    params = SirParams(transmission=transmission, initial_infected=50)
    played = play(Sir(), params, None, population, seed=3, rounds=1000)
    assert played.stopped == "no agent is infectious"
    assert played.metrics[-1]["attack_rate"] == pytest.approx(expected, abs=0.015)


def test_sir_below_the_threshold_stays_a_small_outbreak():
    population = graph({"kind": "erdos_renyi", "mean_degree": 5}, 100_000, seed=7)
    params = SirParams(transmission=0.1, initial_infected=50)  # cT = 0.5
    played = play(Sir(), params, None, population, seed=3, rounds=1000)
    assert played.stopped == "no agent is infectious"
    # A subcritical chain from each seed averages 1 / (1 - cT) = 2 agents.
    assert played.metrics[-1]["attack_rate"] < 0.005


def test_voter_cliques_end_all_ones_with_the_initial_share():
    share, size, cliques = 0.3, 10, 500
    population = graph({"kind": "cliques", "size": size}, size * cliques)
    ended = []
    for seed in (1, 2):
        played = play(Voter(), VoterParams(initial_share=share), None, population, seed, 5000)
        assert played.stopped == "every group is unanimous"
        assert played.metrics[0]["share_ones"] == share  # an exact count in round 1
        ended.append(played.values[-1].reshape(cliques, size)[:, 0])
    all_ones = np.concatenate(ended)
    stderr = math.sqrt(share * (1 - share) / all_ones.size)
    assert abs(all_ones.mean() - share) < 3 * stderr


@pytest.mark.parametrize(("epsilon", "clusters"), [(0.3, (1, 1)), (0.1, (3, 6))])
def test_hegselmann_krause_on_a_complete_graph_reaches_rest_in_clusters(epsilon, clusters):
    population = graph({"kind": "cliques", "size": 1000}, 1000)
    params = BoundedConfidenceParams(epsilon=epsilon)
    played = play(BoundedConfidence(), params, None, population, seed=1, rounds=200)
    assert played.stopped.startswith("opinions are at rest")
    assert np.array_equal(played.values[-1], played.values[-2])
    last = played.metrics[-1]
    assert clusters[0] <= last["clusters"] <= clusters[1]
    if last["clusters"] == 1:
        assert last["spread"] < 1e-6


def test_deffuant_moves_a_close_pair_mu_of_the_gap_each_keeping_the_pair_sum():
    # Pairs (0, 1) closer than epsilon, (2, 3) too far apart; 4 has no partner this round.
    previous = [0.2, 0.3, 0.1, 0.9, 0.5]
    seen = observation(previous, [0] * 6, [])
    partner = np.array([1, 0, 3, 2, -1])
    paired = Partners(
        numbers=partner,
        values=np.where(partner >= 0, np.asarray(previous)[partner], np.nan),
    )
    seen = Observation(**{**seen.__dict__, "partners": paired})
    params = BoundedConfidenceParams(model="deffuant", epsilon=0.2, mu=0.3)
    got = Averaging().decide(params, Params(), seen)
    assert got == pytest.approx([0.23, 0.27, 0.1, 0.9, 0.5])
    assert got[0] + got[1] == pytest.approx(0.5, abs=1e-15)
    # Without the runtime's pairs it says what it needs.
    with pytest.raises(ValueError, match="Observation.partners"):
        Averaging().decide(params, Params(), observation(previous, [0] * 6, []))


def test_deffuant_counts_unsettled_agents_and_stops_when_no_meeting_moves_anyone_much():
    params = BoundedConfidenceParams(model="deffuant", epsilon=0.2, tolerance=1e-3)
    sim = BoundedConfidence()

    def metrics(values):
        values = np.asarray(values, dtype=np.float64)
        ids = (1 << 32) | np.arange(len(values))
        status = np.full(len(values), VALID, dtype=np.uint8)
        return sim.resolve(params, RoundActions(1, ids, values, status)).metrics

    # 0.5 and 0.6 could still meet (a gap over 2 tolerance / mu = 0.004); 0.9 is out of reach.
    first = metrics([0.5, 0.6, 0.9])
    assert first["unsettled"] == 2 and first["clusters"] == 2
    assert sim.stop(params, [first]) is None
    # Within 0.004 of each other: no meeting moves anyone by more than 0.002.
    rest = metrics([0.5, 0.503, 0.9])
    assert rest["unsettled"] == 0
    assert sim.stop(params, [first, rest]).startswith("opinions are at rest")
    hk = BoundedConfidenceParams(epsilon=0.2)
    assert (
        sim.resolve(
            hk, RoundActions(1, np.array([1]), np.array([0.5]), np.array([VALID], dtype=np.uint8))
        ).metrics["unsettled"]
        is None
    )


def test_only_deffuant_pairs_agents_and_plays_a_complete_graph():
    sim = BoundedConfidence()
    deffuant = BoundedConfidenceParams(model="deffuant")
    assert sim.pairs_agents(deffuant) and sim.plays_complete_graph(deffuant)
    hk = BoundedConfidenceParams()
    assert not sim.pairs_agents(hk) and not sim.plays_complete_graph(hk)
    assert not any(
        s.pairs_agents(s.params()) or s.plays_complete_graph(s.params()) for s in (Sir(), Voter())
    )


def major_clusters(opinions: np.ndarray, share: float = 0.02) -> int:
    """Clusters (sorted opinions split at gaps over 0.01) holding at least `share` of them."""
    ordered = np.sort(opinions)
    cuts = np.flatnonzero(np.diff(ordered) > 0.01) + 1
    sizes = np.diff(np.concatenate([[0], cuts, [len(ordered)]]))
    return int(np.count_nonzero(sizes >= share * len(ordered)))


@pytest.mark.parametrize(("epsilon", "expected"), [(0.5, (1, 1)), (0.25, (2, 2)), (0.1, (4, 6))])
def test_deffuant_on_a_complete_graph_ends_in_about_one_over_two_epsilon_clusters(
    epsilon, expected
):
    params = BoundedConfidenceParams(model="deffuant", epsilon=epsilon)
    played = play(BoundedConfidence(), params, None, CompleteGraph(600), seed=3, rounds=400)
    last = played.values[-1]
    assert expected[0] <= major_clusters(last) <= expected[1]
    if epsilon >= 0.25:
        assert played.stopped.startswith("opinions are at rest")
    if epsilon == 0.5:
        assert played.metrics[-1]["spread"] < 1e-5
    # The mean opinion is kept, up to float rounding.
    for values in played.values[1:]:
        assert values.mean() == pytest.approx(played.values[0].mean(), abs=1e-12)


# -- placement does not matter -------------------------------------------------------------------

CASES = [
    (Sir(), SirParams(transmission=0.3, initial_infected=20)),
    (Voter(), VoterParams(initial_share=0.4)),
    (BoundedConfidence(), BoundedConfidenceParams(epsilon=0.25)),
    (BoundedConfidence(), BoundedConfidenceParams(model="deffuant", epsilon=0.3, mu=0.4)),
]


@pytest.mark.parametrize(("simulation", "params"), CASES, ids=lambda c: type(c).__name__)
def test_the_same_seed_gives_the_same_values_whatever_the_cohorts(simulation, params):
    population = graph({"kind": "erdos_renyi", "mean_degree": 6}, 3000, seed=5)
    whole = play(simulation, params, None, population, seed=11, rounds=12)
    again = play(simulation, params, None, population, seed=11, rounds=12)
    split = play(simulation, params, None, population, seed=11, rounds=12, cohorts=2)
    many = play(simulation, params, None, population, seed=11, rounds=12, cohorts=7)
    other = play(simulation, params, None, population, seed=12, rounds=12)
    for played in (again, split, many):
        assert played.rounds == whole.rounds and played.metrics == whole.metrics
        for a, b in zip(whole.values, played.values, strict=True):
            assert np.array_equal(a, b, equal_nan=True)
    assert not np.array_equal(whole.values[0], other.values[0])


def test_deffuant_on_a_complete_graph_is_the_same_whatever_the_cohorts():
    params = BoundedConfidenceParams(model="deffuant", epsilon=0.3)
    whole = play(BoundedConfidence(), params, None, CompleteGraph(301), seed=4, rounds=8)
    split = play(BoundedConfidence(), params, None, CompleteGraph(301), seed=4, rounds=8, cohorts=4)
    for a, b in zip(whole.values, split.values, strict=True):
        assert np.array_equal(a, b)
    assert not np.array_equal(whole.values[-1], whole.values[1])  # pairs met and moved
