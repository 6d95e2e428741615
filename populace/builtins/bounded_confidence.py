"""Opinion dynamics with bounded confidence on the population's graph, as the built-in network
plugin `bounded_confidence`.

Each agent holds an opinion in [0, 1] (its public value), uniformly random in round 1. Agents
only listen to opinions within `epsilon` of their own. One model for now:

- `hegselmann_krause` (Hegselmann and Krause, 2002): every round, all at once, each agent moves
  to the mean of its own opinion and its neighbours' opinions (after the last round) that lie
  within epsilon of its own. On a complete graph the opinions settle into clusters more than
  epsilon apart: one (consensus) for epsilon above about 0.2, about 1 / (2 epsilon) for small
  epsilon.

The Deffuant-Weisbuch model (random pairs of neighbours meeting and moving towards each other)
needs a random pairing of neighbours that the plugin interface does not offer yet; it will be
another value of `model`.

When to stop. `resolve` sees this round's opinions, not the last round's, so it cannot measure
how far agents moved. Instead the policy never makes a move of `tolerance` or less: an agent
whose new opinion would lie within `tolerance` of its current one keeps its current one exactly
(the usual "max change below tolerance" criterion, applied agent by agent). Once no agent moves
more than that, every opinion stays bit for bit and so does every metric; the run stops at the
first round whose mean, spread and standard deviation equal the last round's exactly. Written
with populace.plugin only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np
from pydantic import Field

from populace.plugin import (
    INVALID,
    Metric,
    MetricValue,
    NumberAction,
    Observation,
    Params,
    PolicySupport,
    Resolution,
    RoundActions,
    RulePolicy,
    Simulation,
    exact_sum,
)

# The policy's stream (Observation.uniforms), numbered by the plugin.
OPINION_STREAM = 0
# What the run stops on: all equal to the last round's means the opinions are at rest.
AT_REST = ("mean", "spread", "std")


class BoundedConfidenceParams(Params):
    model: Literal["hegselmann_krause"] = Field(
        "hegselmann_krause",
        title="Model",
        description="hegselmann_krause: each agent moves to the mean of the opinions it trusts",
    )
    epsilon: float = Field(
        0.2,
        gt=0,
        le=1,
        allow_inf_nan=False,
        title="Confidence bound",
        description="an agent listens to opinions at most this far from its own",
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


class Averaging(RulePolicy):
    """Moves to the mean of the opinions within the confidence bound, its own included."""

    def decide(self, params: BoundedConfidenceParams, policy: Params, observation: Observation):
        drawn = observation.uniforms(OPINION_STREAM)
        if observation.round == 1:
            return drawn
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


class BoundedConfidence(Simulation):
    title = "Bounded confidence"
    description = (
        "Agents hold opinions between 0 and 1 and move towards the neighbours' opinions close "
        "enough to their own (Hegselmann-Krause): consensus, polarisation or fragmentation."
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
            "n_invalid",
            "Invalid opinions",
            type="integer",
            unit="agents",
            description="Agents whose value was not an opinion in [0, 1]",
        ),
    )
    policies = (
        PolicySupport(
            "averaging",
            "Averaging",
            "moves to the mean of the opinions within the confidence bound",
            rule=Averaging,
        ),
    )
    default_policy = "averaging"
    convergence_metric = "mean"

    def action(self, params: BoundedConfidenceParams) -> NumberAction:
        return NumberAction(0.0, 1.0)

    def resolve(self, params: BoundedConfidenceParams, actions: RoundActions) -> Resolution:
        opinions = np.sort(actions.values[actions.valid])
        metrics: dict[str, MetricValue] = {
            "mean": None,
            "spread": None,
            "std": None,
            "clusters": 0,
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
        return Resolution(metrics)

    def stop(self, params: BoundedConfidenceParams, history: Sequence[Mapping[str, MetricValue]]):
        last, before = (history[-1], history[-2]) if len(history) >= 2 else ({}, {})
        if last.get("mean") is not None and all(last.get(m) == before.get(m) for m in AT_REST):
            return f"opinions are at rest: no agent moves more than {params.tolerance:g}"
        return None
