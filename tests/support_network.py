"""An in-process reference driver for network simulations: plays a plugin's rule policy over a
graph round by round, building each cohort's Observation the way a worker does, and resolving
and stopping the way the manager does. No processes, no sockets: the contract in one place.

Per round, for each cohort (contiguous ranges of agent numbers, `cohorts` of them):
agent_ids = (population_id << 32) | number; uniforms(stream) = randomness.uniforms(seed, round,
1000 + stream, numbers) (a network simulation draws by agent number, so any population deployed
from the same config and seed plays the same); chosen(count, stream) = chosen.chosen(seed, stream, numbers, size, count);
previous and streak after the last round (NaN and 0 before round 1); neighbours = the cohort's
CSR rows with their neighbours' values after the last round. A value its action type refuses
counts INVALID and becomes NaN. The streak grows by one where the value stayed the same (NaN
staying NaN included) and restarts at 1 where it changed. A simulation that pairs agents
(Simulation.pairs_agents) gets partners = the whole graph's matching of the round
(pairing.graph_matching; pairing.complete_pairs on a complete graph, `CompleteGraph(size)`,
where neighbours is None), nobody paired in round 1, with the partners' values after the last
round.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from populace.plugin import (
    INVALID,
    VALID,
    Neighbours,
    Observation,
    Params,
    Partners,
    RoundActions,
    Simulation,
)
from worker_server.graphs.csr import Graph
from worker_server.graphs.stats import component_labels
from worker_server.rounds import chosen as chosen_rule
from worker_server.rounds import pairing, randomness

STREAM_BASE = 1000


def graph_csr(indptr: np.ndarray, indices: np.ndarray) -> Graph:
    """A graph from CSR arrays (each undirected edge in both rows, rows sorted)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    return Graph(nodes=len(indptr) - 1, indptr=indptr, indices=np.asarray(indices))


@dataclass(frozen=True)
class CompleteGraph:
    """A complete graph of `nodes` agents (graph: {kind: complete}): no edges are stored."""

    nodes: int


def groups_of(graph: Graph | CompleteGraph) -> np.ndarray:
    """Each agent's connected component, numbered 0, 1, ... by the component's lowest agent."""
    if isinstance(graph, CompleteGraph):
        return np.zeros(graph.nodes, dtype=np.int64)
    return np.unique(component_labels(graph), return_inverse=True)[1].astype(np.int64)


@dataclass
class Played:
    values: list[np.ndarray] = field(default_factory=list)  # per round, NaN where invalid
    metrics: list[dict] = field(default_factory=list)  # per round
    stopped: str | None = None  # the plugin's stop reason, None when the rounds ran out

    @property
    def rounds(self) -> int:
        return len(self.values)


def bounds_of(size: int, cohorts: int) -> list[tuple[int, int]]:
    edges = np.linspace(0, size, cohorts + 1).round().astype(np.int64)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True)]


def matching(graph: Graph | CompleteGraph, seed: int, round_number: int) -> np.ndarray:
    """Every agent's partner in the round (-1: none), as the processes compute it together."""
    if round_number == 1:
        return np.full(graph.nodes, pairing.NONE, dtype=np.int64)
    if isinstance(graph, CompleteGraph):
        numbers = np.arange(graph.nodes, dtype=np.int64)
        return pairing.complete_pairs(seed, round_number, numbers, graph.nodes)
    return pairing.graph_matching(seed, round_number, graph.indptr, graph.indices)


def observe(
    graph: Graph | CompleteGraph,
    seed: int,
    round_number: int,
    start: int,
    stop: int,
    previous: np.ndarray,
    streak: np.ndarray,
    population_id: int,
    partners: np.ndarray | None = None,
) -> Observation:
    """What the cohort of agents numbered start..stop-1 sees before it acts (partners: the
    round's matching, for a simulation that pairs agents)."""
    size = graph.nodes
    numbers = np.arange(start, stop, dtype=np.int64)
    ids = (np.int64(population_id) << np.int64(32)) | numbers
    neighbours = None
    if not isinstance(graph, CompleteGraph):
        rows = graph.rows(start, stop)
        neighbour_numbers = np.asarray(rows.indices, dtype=np.int64)
        neighbours = Neighbours(
            offsets=rows.indptr, numbers=neighbour_numbers, values=previous[neighbour_numbers]
        )
    paired = None
    if partners is not None:
        mine = partners[start:stop]
        paired = Partners(
            numbers=mine,
            values=np.where(mine >= 0, previous[np.maximum(mine, 0)], np.nan),
        )

    def uniforms(stream: int) -> np.ndarray:
        if not (isinstance(stream, int) and 0 <= stream <= chosen_rule.MAX_STREAM):
            raise ValueError(f"uniforms: a stream number in 0..999, not {stream!r}")
        return randomness.uniforms(seed, round_number, STREAM_BASE + stream, numbers)

    def chosen(count: int, stream: int) -> np.ndarray:
        return chosen_rule.chosen(seed, stream, numbers, size, count)

    return Observation(
        round=round_number,
        agent_ids=ids,
        feedback={},
        group={},
        attributes={},
        uniforms=uniforms,
        previous=previous[start:stop].copy(),
        streak=streak[start:stop].copy(),
        neighbours=neighbours,
        population_size=size,
        chosen=chosen,
        partners=paired,
    )


def play(
    simulation: Simulation,
    params: Params,
    policy_params: Params | None,
    graph: Graph | CompleteGraph,
    seed: int,
    rounds: int,
    population_id: int = 1,
    cohorts: int = 1,
    policy: str | None = None,
) -> Played:
    """Play up to `rounds` rounds (fewer when the plugin stops the run)."""
    support = {p.name: p for p in simulation.policies}[policy or simulation.default_policy]
    rule = support.rule()
    policy_params = policy_params if policy_params is not None else rule.params()
    action = simulation.action(params)
    size = graph.nodes
    ids = (np.int64(population_id) << np.int64(32)) | np.arange(size, dtype=np.int64)
    groups = groups_of(graph)
    previous = np.full(size, np.nan)
    streak = np.zeros(size, dtype=np.int64)
    played = Played()
    last_metrics: dict = {}
    pairs = simulation.pairs_agents(params)
    for round_number in range(1, rounds + 1):
        decided = []
        partners = matching(graph, seed, round_number) if pairs else None
        for start, stop in bounds_of(size, cohorts):
            observation = observe(
                graph, seed, round_number, start, stop, previous, streak, population_id, partners
            )
            values = np.asarray(rule.decide(params, policy_params, observation), dtype=np.float64)
            assert values.shape == (stop - start,), "one value per agent of the cohort"
            decided.append(values)
        values = np.concatenate(decided) if decided else np.empty(0)
        valid = action.valid(values)
        values = np.where(valid, values, np.nan)
        status = np.where(valid, VALID, INVALID).astype(np.uint8)
        resolution = simulation.resolve(
            params,
            RoundActions(
                round=round_number,
                agent_ids=ids,
                values=values,
                status=status,
                previous_metrics=last_metrics,
                groups=groups,
            ),
        )
        same = (values == previous) | (np.isnan(values) & np.isnan(previous))
        streak = np.where(same, streak + 1, 1)
        previous = values
        last_metrics = dict(resolution.metrics)
        played.values.append(values)
        played.metrics.append(last_metrics)
        played.stopped = simulation.stop(params, played.metrics)
        if played.stopped:
            break
    return played
