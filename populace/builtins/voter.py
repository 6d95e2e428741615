"""The voter model on the population's graph, as the built-in network plugin `voter`.

Each agent holds an opinion, 0 or 1 (its public value). In round 1 exactly
round(initial_share * agents) agents hold 1, by a seeded draw over the whole population (an exact
count, not one coin per agent, so every seed starts from the same share; the same agents
whatever the placement). From round 2 on every agent, all at once, adopts the opinion one of its
neighbours held after the last round, picked uniformly at random; an agent with no neighbour
keeps its own. On a regular graph (e.g. cliques) the share of 1s is then a martingale, so a
group ends all-1 with probability its initial share of 1s.

The run stops when every group (connected component of the graph) is unanimous: then no
opinion can change any more. Written with populace.plugin only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from pydantic import Field

from populace.plugin import (
    INVALID,
    IntegerAction,
    Metric,
    MetricValue,
    Observation,
    Params,
    PolicySupport,
    Resolution,
    RoundActions,
    RulePolicy,
    Simulation,
)

# The policy's streams (Observation.uniforms and .chosen), numbered by the plugin.
SEED_STREAM = 0
PICK_STREAM = 0


class VoterParams(Params):
    initial_share: float = Field(
        0.5,
        ge=0,
        le=1,
        allow_inf_nan=False,
        title="Initial share of 1s",
        description="share of agents holding opinion 1 in round 1 (an exact count, rounded)",
    )


class CopyANeighbour(RulePolicy):
    """Adopts the opinion of one neighbour picked uniformly at random (the classic voter model,
    updated synchronously)."""

    def decide(self, params: VoterParams, policy: Params, observation: Observation):
        size = observation.population_size
        first = observation.chosen(round(params.initial_share * size), SEED_STREAM)
        initial = first.astype(np.float64)
        if observation.round == 1:
            return initial
        neighbours = observation.require_neighbours()
        at = neighbours.pick(observation.uniforms(PICK_STREAM))
        heard = neighbours.values_at(at)  # NaN for an agent with no neighbour
        opinion = np.where(at >= 0, heard, observation.previous)
        # A neighbour without a valid opinion (its action was lost) is not copied: the agent
        # keeps its own, or, with none either, takes its round-1 opinion again.
        opinion = np.where(np.isnan(opinion), observation.previous, opinion)
        return np.where(np.isnan(opinion), initial, opinion)


class Voter(Simulation):
    title = "Voter model"
    description = (
        "Agents hold opinion 0 or 1 and each round copy a random neighbour's: how long until "
        "each group of the graph agrees, and on what."
    )
    params = VoterParams
    network = True
    metrics = (
        Metric(
            "share_ones",
            "Share of 1s",
            description="Share of agents with a valid opinion holding 1",
        ),
        Metric(
            "groups",
            "Groups",
            type="integer",
            description="Connected components of the graph (isolated agents count one each)",
        ),
        Metric(
            "groups_at_consensus",
            "Groups at consensus",
            type="integer",
            description="Groups whose agents all hold a valid opinion, the same one",
        ),
        Metric(
            "n_invalid",
            "Invalid opinions",
            type="integer",
            unit="agents",
            description="Agents whose value was not 0 or 1",
        ),
    )
    group_metrics = (
        Metric(
            "share_ones",
            "Share of 1s",
            description="Share of the group's agents with a valid opinion holding 1",
        ),
        Metric(
            "consensus_round",
            "Consensus reached in round",
            type="integer",
            description="The round after which every agent of the group held the same opinion "
            "(empty until then): its rounds to consensus",
        ),
    )
    policies = (
        PolicySupport(
            "copy_a_neighbour",
            "Copy a neighbour",
            "adopts the opinion of a neighbour picked at random",
            rule=CopyANeighbour,
        ),
    )
    default_policy = "copy_a_neighbour"
    convergence_metric = "share_ones"

    def action(self, params: VoterParams) -> IntegerAction:
        return IntegerAction(0, 1)

    def resolve(self, params: VoterParams, actions: RoundActions) -> Resolution:
        valid = actions.valid
        ones = valid & (actions.values == 1)
        agents = len(actions.agent_ids)
        group = (
            np.zeros(agents, dtype=np.int64)
            if actions.groups is None
            else np.asarray(actions.groups, dtype=np.int64)
        )
        n_groups = int(group.max()) + 1 if agents else 0
        members = np.bincount(group, minlength=n_groups)
        answered = np.bincount(group, weights=valid, minlength=n_groups)
        holding_one = np.bincount(group, weights=ones, minlength=n_groups)
        unanimous = (answered == members) & ((holding_one == 0) | (holding_one == members))
        n_valid = int(valid.sum())
        with np.errstate(invalid="ignore", divide="ignore"):
            group_share = np.where(answered > 0, holding_one / answered, np.nan)
        return Resolution(
            {
                "share_ones": int(ones.sum()) / n_valid if n_valid else None,
                "groups": n_groups,
                "groups_at_consensus": int(np.count_nonzero(unanimous)),
                "n_invalid": actions.count(INVALID),
            },
            group_metrics={
                "share_ones": group_share,
                "consensus_round": first_round(
                    unanimous, actions.round, actions.previous_group_metrics.get("consensus_round")
                ),
            },
        )

    def stop(self, params: VoterParams, history: Sequence[Mapping[str, MetricValue]]):
        last = history[-1] if history else {}
        if last.get("groups") and last.get("groups_at_consensus") == last.get("groups"):
            return "every group is unanimous"
        return None


def first_round(now: np.ndarray, round_number: int, before: np.ndarray | None) -> np.ndarray:
    """Per group, the first round in which `now` held (NaN until it does), carried from the
    round before's values: a unanimous group stays unanimous, so its round is its rounds to
    consensus."""
    reached = np.where(now, float(round_number), np.nan)
    if before is None or len(before) != len(now):
        return reached
    return np.where(np.isnan(before), reached, before)
