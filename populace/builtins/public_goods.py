"""The public goods game (GAMA-Bench's "Public Goods"), as the built-in plugin `public_goods`.

Agents play in groups of `group_size`: each puts a whole number of tokens from its endowment
into the group's pot; the pot is multiplied and shared equally by the group, so an agent's payoff
is endowment - contribution + multiplier * pot / members. Everyone is best off when all give
everything, and each is tempted to give nothing. Written with populace.plugin only.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from pydantic import Field, model_validator

from populace.plugin import (
    INVALID,
    AgentView,
    IntegerAction,
    Metric,
    MetricValue,
    Observation,
    Params,
    PolicySupport,
    Prompt,
    Resolution,
    RoundActions,
    RulePolicy,
    Simulation,
    agent_numbers,
    exact_sum,
    llm_policy,
    raise_invalid,
)


class PublicGoodsParams(Params):
    endowment: int = Field(
        20, ge=1, le=1_000_000, title="Endowment", description="tokens each agent holds every round"
    )
    multiplier: float = Field(
        2.0,
        gt=0,
        le=1000,
        allow_inf_nan=False,
        title="Multiplier",
        description="the pot is multiplied by this, then shared equally by the group",
    )
    group_size: int = Field(
        10,
        ge=2,
        le=100_000,
        title="Group size",
        description="agents per group (the last group may be smaller)",
    )

    @model_validator(mode="after")
    def _a_dilemma(self) -> PublicGoodsParams:
        if self.multiplier > self.group_size:
            raise_invalid(
                "PublicGoodsParams",
                [
                    (
                        ("multiplier",),
                        f"at most group_size ({self.group_size}): above it, giving pays for itself and there is no dilemma",
                        self.multiplier,
                    )
                ],
            )
        return self


class FreeRider(RulePolicy):
    """Gives nothing."""

    def decide(self, params: PublicGoodsParams, policy: Params, observation: Observation):
        return np.zeros(len(observation.agent_ids))


class FullCooperator(RulePolicy):
    """Gives the whole endowment."""

    def decide(self, params: PublicGoodsParams, policy: Params, observation: Observation):
        return np.full(len(observation.agent_ids), float(params.endowment))


class ConditionalCooperatorParams(Params):
    first: float = Field(
        0.5, ge=0, le=1, title="First round", description="share of the endowment given in round 1"
    )


class ConditionalCooperator(RulePolicy):
    """Gives what its group gave on average last round (rounded to a whole token), and a share
    of its endowment in round 1: the most common type in laboratory public goods games."""

    params = ConditionalCooperatorParams

    def decide(self, params: PublicGoodsParams, policy: ConditionalCooperatorParams, observation):
        last = observation.group.get("mean_contribution")
        first = np.floor(policy.first * params.endowment + 0.5)
        if last is None:
            return np.full(len(observation.agent_ids), first)
        return np.where(np.isnan(last), first, np.floor(last + 0.5))


class PublicGoods(Simulation):
    title = "Public goods"
    description = (
        "Groups of agents each give tokens to a pot that is multiplied and shared equally "
        "(GAMA-Bench): cooperation against the temptation to free-ride."
    )
    params = PublicGoodsParams
    metrics = (
        Metric(
            "mean_contribution",
            "Mean contribution",
            unit="tokens",
            description="Mean tokens given by the agents that answered",
        ),
        Metric(
            "contribution_share",
            "Share of endowment given",
            description="Mean contribution over the endowment, 0 to 1",
        ),
        Metric(
            "free_rider_share",
            "Free riders",
            description="Share of answering agents that gave nothing",
        ),
        Metric(
            "mean_payoff",
            "Mean payoff",
            unit="tokens",
            description="Mean payoff of the agents that answered",
        ),
        Metric(
            "n_valid",
            "Valid answers",
            type="integer",
            unit="agents",
            description="Agents who gave a whole number of tokens within their endowment",
        ),
        Metric(
            "n_invalid",
            "Invalid answers",
            type="integer",
            unit="agents",
            description="Agents whose answer was out of range or could not be read",
        ),
    )
    policies = (
        PolicySupport(
            "conditional_cooperator",
            "Conditional cooperator",
            "gives what its group gave on average last round",
            rule=ConditionalCooperator,
        ),
        PolicySupport("free_rider", "Free rider", "gives nothing", rule=FreeRider),
        PolicySupport(
            "full_cooperator", "Full cooperator", "gives everything", rule=FullCooperator
        ),
        llm_policy("a language model decides each agent's contribution"),
    )
    default_policy = "conditional_cooperator"
    convergence_metric = "mean_contribution"

    def action(self, params: PublicGoodsParams) -> IntegerAction:
        return IntegerAction(0, params.endowment)

    def group_size(self, params: PublicGoodsParams) -> int:
        return params.group_size

    def resolve(self, params: PublicGoodsParams, actions: RoundActions) -> Resolution:
        valid = actions.valid
        # An agent that did not give a valid answer gives nothing and is not counted.
        given = np.where(valid, actions.values, 0.0)
        groups = agent_numbers(actions.agent_ids) // params.group_size
        n_groups = int(groups.max()) + 1 if len(groups) else 0
        pot = np.bincount(groups, weights=given, minlength=n_groups)
        answered = np.bincount(groups, weights=valid, minlength=n_groups)
        members = np.bincount(groups, minlength=n_groups)
        share = params.multiplier * pot / np.maximum(members, 1)
        payoff = params.endowment - given + share[groups]
        n_valid = int(valid.sum())
        metrics: dict[str, MetricValue] = {
            "n_valid": n_valid,
            "n_invalid": actions.count(INVALID),
            "mean_contribution": None,
            "contribution_share": None,
            "free_rider_share": None,
            "mean_payoff": None,
        }
        if n_valid:
            mean = exact_sum(given[valid]) / n_valid
            metrics |= {
                "mean_contribution": mean,
                "contribution_share": mean / params.endowment,
                "free_rider_share": int(np.count_nonzero(given[valid] == 0)) / n_valid,
                "mean_payoff": exact_sum(payoff[valid]) / n_valid,
            }
        with np.errstate(invalid="ignore", divide="ignore"):
            group_mean = np.where(answered > 0, pot / answered, np.nan)
        return Resolution(metrics, groups={"mean_contribution": group_mean, "pot": pot})

    def feedback(self, params: PublicGoodsParams, metrics: Mapping[str, MetricValue]):
        mean = metrics["mean_contribution"]
        return None if mean is None else {"mean_contribution": mean}

    def render(self, params: PublicGoodsParams, view: AgentView) -> Prompt:
        """GAMA-Bench's public goods prompt: the rules, the round, what the agent's group gave
        last round, the agent's character, then the question."""
        n, endowment = params.group_size, params.endowment
        system = (
            f"You are playing a public goods game in a group of {n} players.\n\n"
            "# Game rules\n"
            f"1. Every round each player holds {endowment} tokens and secretly decides how many "
            f"of them, a whole number from 0 to {endowment}, to put into the group's pot.\n"
            f"2. The pot is multiplied by {params.multiplier:g} and shared equally by all {n} "
            "players, whatever each of them gave.\n"
            "3. The tokens a player does not give are theirs to keep.\n"
            "Your goal is to end each round with as many tokens as you can.\n"
        )
        lines = [f"This is round {view.round}."]
        if "mean_contribution" in view.group:
            lines.append(
                f"Last round your group gave {view.group['mean_contribution']:.1f} tokens on "
                f"average, and the pot held {view.group.get('pot', 0):g} tokens."
            )
        if view.persona:
            lines.append(f"\n# Character\n{view.persona}\n")
        lines.append(
            f"How many tokens do you put into the pot? Report a whole number from 0 to "
            f"{endowment}, with no other text.\nAnswer:"
        )
        return Prompt(system=system, user="\n".join(lines))
