"""Opinion dynamics with bounded confidence on the population's graph, as the built-in network
plugin `bounded_confidence`.

Each agent holds an opinion in [0, 1] (its public value), uniformly random in round 1. Agents
only listen to opinions within `epsilon` of their own. Two models:

- `hegselmann_krause` (Hegselmann and Krause, 2002): every round, all at once, each agent moves
  to the mean of its own opinion and its neighbours' opinions (after the last round) that lie
  within epsilon of its own. On a complete graph the opinions settle into clusters more than
  epsilon apart: one (consensus) for epsilon above about 0.2, about 1 / (2 epsilon) for small
  epsilon. Needs a graph of edges.
- `deffuant` (Deffuant, Neau, Amblard and Weisbuch, 2000): every round the runtime pairs the
  agents (Observation.partners: a random matching along the graph's edges, each agent in at
  most one pair, drawn afresh each round; random pairs of the whole population on a complete
  graph, `graph: {kind: complete}`). A pair whose opinions are closer than epsilon both move
  `mu` of the gap towards each other (x += mu (y - x), y += mu (x - y)): the pair's sum, so the
  population's mean opinion, is kept (up to float rounding). On a complete graph: consensus for
  epsilon at or above about 0.3, about 1 / (2 epsilon) major clusters below (2 at 0.25).

When to stop. `resolve` sees this round's opinions, not the last round's, so it cannot measure
how far agents moved. Instead the policy never makes a move of `tolerance` or less: an agent
whose new opinion would lie within `tolerance` of its current one keeps its current one exactly
(the usual "max change below tolerance" criterion, applied agent by agent). Hegselmann-Krause:
once no agent moves more than that, every opinion stays bit for bit and so does every metric;
the run stops at the first round whose mean, spread and standard deviation equal the last
round's exactly. Deffuant: a round without a move proves nothing (the pairs are random), so
`resolve` counts the agents that could still move by more than twice the tolerance were they to
meet some agent (`unsettled`: another opinion closer than epsilon yet more than 2 tolerance / mu
away), and the run stops when there is none. Not "no move at all": once a cluster has
converged, its last agents lie within tolerance / mu of the others, and the two that could still
meet and move (by at most 2 tolerance) may take thousands of rounds to be paired. On a sparse
graph agents may never meet: give the run a round limit.

The LLM variant (policy `llm`, at small scale): each agent reads its own last position and its
neighbours' on the params' `topic` and states a new one; its first prompt states the opinion the
rule-based policy starts from (AgentView.draw). How far it listens is the model's, not epsilon's.
Written with populace.plugin only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np
from pydantic import Field

from populace.plugin import (
    INVALID,
    AgentView,
    Metric,
    MetricValue,
    NumberAction,
    Observation,
    Params,
    PolicySupport,
    Prompt,
    Resolution,
    RoundActions,
    RulePolicy,
    Simulation,
    exact_sum,
    llm_policy,
)

# The policy's stream (Observation.uniforms), numbered by the plugin.
OPINION_STREAM = 0
# What the run stops on: all equal to the last round's means the opinions are at rest.
AT_REST = ("mean", "spread", "std")


class BoundedConfidenceParams(Params):
    model: Literal["hegselmann_krause", "deffuant"] = Field(
        "hegselmann_krause",
        title="Model",
        description="hegselmann_krause: each agent moves to the mean of the opinions it trusts; "
        "deffuant: random pairs of neighbours meet and move towards each other",
    )
    epsilon: float = Field(
        0.2,
        gt=0,
        le=1,
        allow_inf_nan=False,
        title="Confidence bound",
        description="an agent listens to opinions at most this far from its own",
    )
    mu: float = Field(
        0.5,
        gt=0,
        le=0.5,
        allow_inf_nan=False,
        title="Convergence parameter",
        description="deffuant: the share of the gap each agent of a meeting pair moves (0.5: "
        "both move to their mean)",
    )
    tolerance: float = Field(
        1e-6,
        gt=0,
        le=0.01,
        allow_inf_nan=False,
        title="Tolerance",
        description="an agent keeps its opinion rather than move this little or less; the run "
        "stops once nobody moves",
    )
    topic: str = Field(
        "whether cities should close their centres to cars",
        min_length=1,
        max_length=200,
        title="Topic",
        description="llm policy: what the agents discuss (0: strongly against, 1: strongly for)",
    )


class Averaging(RulePolicy):
    """Hegselmann-Krause: moves to the mean of the opinions within the confidence bound, its own
    included. Deffuant: moves towards its partner's opinion when it is within the bound."""

    def decide(self, params: BoundedConfidenceParams, policy: Params, observation: Observation):
        drawn = observation.uniforms(OPINION_STREAM)
        if observation.round == 1:
            return drawn
        if params.model == "deffuant":
            return self.meet(params, observation, drawn)
        neighbours = observation.require_neighbours()
        own = observation.previous
        heard = neighbours.values
        # Neighbours.sum and .count, with the entries' owners computed once (and no temporary
        # left that need not be: at 10^7 entries each costs more than the arithmetic).
        owner = neighbours.owner()
        gap = heard - own[owner]
        np.abs(gap, out=gap)
        trusted = gap <= params.epsilon  # a NaN opinion is not trusted
        del gap
        agents = len(own)
        total = own + np.bincount(owner, weights=np.where(trusted, heard, 0.0), minlength=agents)
        moved = total / (1 + np.bincount(owner[trusted], minlength=agents))
        opinion = np.where(np.abs(moved - own) <= params.tolerance, own, moved)
        # No opinion after round 1 (its action was lost): it starts again from a random one.
        return np.where(np.isnan(own), drawn, opinion)

    @staticmethod
    def meet(params: BoundedConfidenceParams, observation: Observation, drawn: np.ndarray):
        """Deffuant: each agent with a partner closer than epsilon moves mu of the gap towards
        it. Both ends of a pair compute the same |step| (the gap negated is exact), so both move
        or neither does, and the pair's sum is kept."""
        partners = observation.partners
        own = observation.previous
        if partners is None or own is None:
            raise ValueError("the deffuant model needs the runtime's pairs (Observation.partners)")
        gap = partners.values - own  # NaN without a partner, or for one with no opinion
        step = params.mu * gap
        moves = (np.abs(gap) < params.epsilon) & (np.abs(step) > params.tolerance)
        opinion = np.where(moves, own + step, own)
        return np.where(np.isnan(own), drawn, opinion)


class BoundedConfidence(Simulation):
    title = "Bounded confidence"
    description = (
        "Agents hold opinions between 0 and 1 and move towards the neighbours' opinions close "
        "enough to their own (Hegselmann-Krause), or meet in random pairs (Deffuant): "
        "consensus, polarisation or fragmentation."
    )
    params = BoundedConfidenceParams
    network = True
    metrics = (
        Metric("mean", "Mean opinion", description="Mean of the valid opinions"),
        Metric("spread", "Spread", description="Largest opinion minus the smallest"),
        Metric("std", "Standard deviation", description="Standard deviation of the opinions"),
        Metric(
            "clusters",
            "Clusters",
            type="integer",
            description="Opinion clusters: the sorted opinions split wherever two consecutive "
            "ones are more than epsilon apart (on a complete graph, parts that never interact "
            "again; on a sparse graph, clusters closer than epsilon without edges between them "
            "count as one)",
        ),
        Metric(
            "unsettled",
            "Unsettled agents",
            type="integer",
            unit="agents",
            description="Deffuant: agents that could still move by more than twice the "
            "tolerance on meeting some agent (another opinion closer than epsilon but more than "
            "2 tolerance / mu away); the run stops at 0. Empty for Hegselmann-Krause",
        ),
        Metric(
            "n_invalid",
            "Invalid opinions",
            type="integer",
            unit="agents",
            description="Agents whose value was not an opinion in [0, 1]",
        ),
    )
    group_metrics = (
        Metric("mean", "Mean opinion", description="Mean of the group's valid opinions"),
        Metric("spread", "Spread", description="The group's largest opinion minus its smallest"),
        Metric(
            "clusters",
            "Clusters",
            type="integer",
            description="The group's opinion clusters: its sorted opinions split wherever two "
            "consecutive ones are more than epsilon apart",
        ),
    )
    policies = (
        PolicySupport(
            "averaging",
            "Averaging",
            "moves to the mean of the opinions within the confidence bound",
            rule=Averaging,
        ),
        llm_policy(
            "a language model reads the agent's last position and its neighbours' and states "
            "its new position (Hegselmann-Krause's setting: every agent hears its neighbours)"
        ),
    )
    default_policy = "averaging"
    convergence_metric = "mean"

    def pairs_agents(self, params: BoundedConfidenceParams) -> bool:
        return params.model == "deffuant"

    def plays_complete_graph(self, params: BoundedConfidenceParams) -> bool:
        return params.model == "deffuant"  # HK would need every agent's opinion

    def action(self, params: BoundedConfidenceParams) -> NumberAction:
        return NumberAction(0.0, 1.0)

    def render(self, params: BoundedConfidenceParams, view: AgentView) -> Prompt:
        """The LLM variant: an agent states a position on the topic from its own last one and
        its neighbours' (AgentView.previous, .neighbours). In round 1 its position so far is its
        draw, the uniform opinion the rule-based policy starts from."""
        own = view.previous if view.previous is not None else view.draw
        heard = ", ".join(f"{v:.2f}" for v in view.neighbours)
        lines = [view.persona] if view.persona else []
        lines += [
            f"Round {view.round}.",
            f"Your position so far: {own:.2f}.",
            f"Your neighbours' positions: {heard}." if heard else "You have not heard anyone yet.",
            "Having heard them, what is your position now? Answer with one number from 0 to 1.",
            "Position:",
        ]
        return Prompt(
            system=(
                f"You take part in a discussion about {params.topic}. A position is a number "
                "from 0 (strongly against) to 1 (strongly for). You may keep yours or move "
                "towards positions you find convincing."
            ),
            user="\n".join(lines),
        )

    def resolve(self, params: BoundedConfidenceParams, actions: RoundActions) -> Resolution:
        opinions = np.sort(actions.values[actions.valid])
        metrics: dict[str, MetricValue] = {
            "mean": None,
            "spread": None,
            "std": None,
            "clusters": 0,
            "unsettled": 0 if params.model == "deffuant" else None,
            "n_invalid": actions.count(INVALID),
        }
        n = len(opinions)
        if n:
            mean = exact_sum(opinions) / n
            metrics |= {
                "mean": mean,
                "spread": float(opinions[-1] - opinions[0]),
                "std": (exact_sum((opinions - mean) ** 2) / n) ** 0.5,
                "clusters": 1 + int(np.count_nonzero(np.diff(opinions) > params.epsilon)),
            }
            if params.model == "deffuant":
                metrics["unsettled"] = unsettled(opinions, params)
        return Resolution(metrics, group_metrics=by_group(actions, params.epsilon, opinions))

    def stop(self, params: BoundedConfidenceParams, history: Sequence[Mapping[str, MetricValue]]):
        if params.model == "deffuant":
            if history and history[-1].get("mean") is not None and not history[-1]["unsettled"]:
                return (
                    "opinions are at rest: no meeting can move an agent by more than "
                    f"{2 * params.tolerance:g}"
                )
            return None
        last, before = (history[-1], history[-2]) if len(history) >= 2 else ({}, {})
        if last.get("mean") is not None and all(last.get(m) == before.get(m) for m in AT_REST):
            return f"opinions are at rest: no agent moves more than {params.tolerance:g}"
        return None


def by_group(actions: RoundActions, epsilon: float, opinions: np.ndarray) -> dict[str, np.ndarray]:
    """Each group's (connected component's) mean, spread and clusters, all groups at once: the
    valid opinions sorted by group, then by opinion (`opinions`, already sorted, when the graph
    is connected). One float sort of 2·group + opinion (opinions lie in [0, 1], so groups never
    interleave) costs a third of a two-key sort; within a group it orders opinions to about
    1e-9 at 10^6 groups, which moves a cluster count only for a gap within 1e-9 of epsilon."""
    agents = len(actions.agent_ids)
    group = np.zeros(agents, dtype=np.int64) if actions.groups is None else actions.groups
    n_groups = int(group.max()) + 1 if agents else 0
    if n_groups <= 1:
        g, o = np.zeros(len(opinions), dtype=np.int64), opinions
    else:
        g, o = group[actions.valid], actions.values[actions.valid]
        order = np.argsort(2.0 * g + o)
        g, o = g[order], o[order]
    counts = np.bincount(g, minlength=n_groups)
    has = counts > 0
    ends = np.cumsum(counts)
    first, last = np.full(n_groups, np.nan), np.full(n_groups, np.nan)
    first[has], last[has] = o[ends[has] - counts[has]], o[ends[has] - 1]
    gaps = (np.diff(o) > epsilon) & (g[1:] == g[:-1])
    clusters = np.bincount(g[1:][gaps], minlength=n_groups) + has
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.bincount(g, weights=o, minlength=n_groups) / counts
    return {
        "mean": np.where(has, mean, np.nan),
        "spread": last - first,
        "clusters": np.where(has, clusters, np.nan).astype(np.float64),
    }


def unsettled(opinions: np.ndarray, params: BoundedConfidenceParams) -> int:
    """Deffuant: how many of the (sorted) opinions have another one closer than epsilon but far
    enough that meeting it would move them by more than twice the tolerance."""
    reach = 2 * params.tolerance / params.mu
    above = np.searchsorted(opinions, opinions + params.epsilon, side="left") > np.searchsorted(
        opinions, opinions + reach, side="right"
    )
    below = np.searchsorted(opinions, opinions - reach, side="left") > np.searchsorted(
        opinions, opinions - params.epsilon, side="right"
    )
    return int(np.count_nonzero(above | below))
