"""The El Farol bar problem (GAMA-Bench's "El Farol Bar"), as the built-in plugin `el_farol`.

Agents play in groups of `group_size`: each chooses to go to the bar or to stay home. Going is
best when the bar is not crowded (at most `capacity_share` of the group goes) and worst when it
is; staying pays the same either way. No choice is right for everyone: if all predict an
uncrowded bar, all go and it is crowded. Written with populace.plugin only.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from pydantic import Field, model_validator

from populace.plugin import (
    INVALID,
    AgentView,
    ChoiceAction,
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

OPTIONS = ("go", "stay")
GO, STAY = 0.0, 1.0  # the option's index is the action's value


class ElFarolParams(Params):
    capacity_share: float = Field(
        0.6,
        gt=0,
        lt=1,
        title="Capacity",
        description="the bar is crowded when more than this share of the group goes",
    )
    group_size: int = Field(
        10,
        ge=2,
        le=100_000,
        title="Group size",
        description="agents per group (the last group may be smaller)",
    )
    payoff_go_uncrowded: float = Field(
        10,
        ge=-1e6,
        le=1e6,
        title="Go, not crowded",
        description="payoff for going when it is not crowded",
    )
    payoff_go_crowded: float = Field(
        0, ge=-1e6, le=1e6, title="Go, crowded", description="payoff for going when it is crowded"
    )
    payoff_stay: float = Field(
        5, ge=-1e6, le=1e6, title="Stay", description="payoff for staying home, crowded or not"
    )

    @model_validator(mode="after")
    def _a_dilemma(self) -> ElFarolParams:
        if not self.payoff_go_crowded < self.payoff_stay < self.payoff_go_uncrowded:
            raise_invalid(
                "ElFarolParams",
                [
                    (
                        ("payoff_stay",),
                        "between payoff_go_crowded and payoff_go_uncrowded (exclusive): "
                        "otherwise one choice is always best and there is no dilemma",
                        self.payoff_stay,
                    )
                ],
            )
        return self


class FixedProbabilityParams(Params):
    go: float = Field(0.6, ge=0, le=1, title="Chance of going", description="every round")


class FixedProbability(RulePolicy):
    """Goes with the same probability every round (the mixed equilibrium when it equals the
    capacity)."""

    params = FixedProbabilityParams

    def decide(
        self, params: ElFarolParams, policy: FixedProbabilityParams, observation: Observation
    ):
        return np.where(observation.uniforms(0) < policy.go, GO, STAY)


class PredictorParams(Params):
    first: float = Field(
        0.5,
        ge=0,
        le=1,
        title="Chance of going in round 1",
        description="before any attendance is known",
    )
    noise: float = Field(
        0.1,
        ge=0,
        le=1,
        title="Slip",
        description="chance of doing the opposite of what the prediction says",
    )


class Predictor(RulePolicy):
    """Predicts this round's attendance to be last round's in its group, goes when that is not
    crowded, and slips to the other choice with a small probability (W. B. Arthur's simplest
    predictor, made stochastic so that a group does not swing all at once)."""

    params = PredictorParams

    def decide(self, params: ElFarolParams, policy: PredictorParams, observation: Observation):
        draws = observation.uniforms(0)
        last = observation.group.get("go_ratio")
        if last is None:
            return np.where(draws < policy.first, GO, STAY)
        predicted_go = last <= params.capacity_share
        first_round = np.where(draws < policy.first, GO, STAY)
        choice = np.where(predicted_go, GO, STAY)
        slipped = observation.uniforms(1) < policy.noise
        choice = np.where(slipped, STAY - choice, choice)
        return np.where(np.isnan(last), first_round, choice)


class ElFarol(Simulation):
    title = "El Farol bar"
    description = (
        "Groups of agents each choose to go to a bar that is only fun when it is not crowded, "
        "or to stay home (GAMA-Bench): coordination without communication."
    )
    params = ElFarolParams
    metrics = (
        Metric("go_ratio", "Went", description="Share of answering agents that went to the bar"),
        Metric(
            "crowded_share",
            "Crowded groups",
            description="Share of groups whose bar was crowded",
        ),
        Metric(
            "mean_payoff",
            "Mean payoff",
            description="Mean payoff of the agents that answered",
        ),
        Metric(
            "n_valid",
            "Valid answers",
            type="integer",
            unit="agents",
            description="Agents who chose go or stay",
        ),
        Metric(
            "n_invalid",
            "Invalid answers",
            type="integer",
            unit="agents",
            description="Agents whose answer was neither go nor stay",
        ),
    )
    policies = (
        PolicySupport(
            "predictor",
            "Predictor",
            "goes when its group was not crowded last round, with a small slip",
            rule=Predictor,
        ),
        PolicySupport(
            "fixed_probability",
            "Fixed probability",
            "goes with the same chance every round",
            rule=FixedProbability,
        ),
        llm_policy("a language model decides whether each agent goes"),
    )
    default_policy = "predictor"
    convergence_metric = "go_ratio"

    def action(self, params: ElFarolParams) -> ChoiceAction:
        return ChoiceAction(OPTIONS)

    def group_size(self, params: ElFarolParams) -> int:
        return params.group_size

    def resolve(self, params: ElFarolParams, actions: RoundActions) -> Resolution:
        valid = actions.valid
        went = valid & (actions.values == GO)
        groups = agent_numbers(actions.agent_ids) // params.group_size
        n_groups = int(groups.max()) + 1 if len(groups) else 0
        going = np.bincount(groups, weights=went, minlength=n_groups)
        answered = np.bincount(groups, weights=valid, minlength=n_groups)
        with np.errstate(invalid="ignore", divide="ignore"):
            go_ratio = np.where(answered > 0, going / answered, np.nan)
        # A group where nobody answered is neither crowded nor not: it is left out.
        counted = answered > 0
        crowded = counted & (go_ratio > params.capacity_share)
        payoff = np.where(
            went,
            np.where(crowded[groups], params.payoff_go_crowded, params.payoff_go_uncrowded),
            params.payoff_stay,
        )
        n_valid = int(valid.sum())
        metrics: dict[str, MetricValue] = {
            "n_valid": n_valid,
            "n_invalid": actions.count(INVALID),
            "go_ratio": None,
            "crowded_share": None,
            "mean_payoff": None,
        }
        if n_valid:
            metrics |= {
                "go_ratio": int(went.sum()) / n_valid,
                "crowded_share": int(crowded.sum()) / int(counted.sum()),
                "mean_payoff": exact_sum(payoff[valid]) / n_valid,
            }
        return Resolution(metrics, groups={"go_ratio": go_ratio})

    def feedback(self, params: ElFarolParams, metrics: Mapping[str, MetricValue]):
        ratio = metrics["go_ratio"]
        return None if ratio is None else {"go_ratio": ratio}

    def render(self, params: ElFarolParams, view: AgentView) -> Prompt:
        """GAMA-Bench's El Farol prompt: the rules, the round, how crowded the agent's group's
        bar was last round, the agent's character, then the question."""
        n, capacity = params.group_size, params.capacity_share
        system = (
            f"You are one of {n} people in a small town deciding, every week, whether to go to "
            "the town's only bar.\n\n"
            "# Rules\n"
            f"1. If at most {capacity:.0%} of the {n} go, the bar is fun: those who went get "
            f"{params.payoff_go_uncrowded:g} points.\n"
            f"2. If more than {capacity:.0%} go, it is crowded: those who went get "
            f"{params.payoff_go_crowded:g} points.\n"
            f"3. Those who stay home get {params.payoff_stay:g} points either way.\n"
            "Everyone decides at the same time, without talking to each other. Your goal is to "
            "get as many points as you can.\n"
        )
        lines = [f"This is week {view.round}."]
        if "go_ratio" in view.group:
            went = view.group["go_ratio"]
            crowded = "crowded" if went > capacity else "not crowded"
            lines.append(f"Last week {went:.0%} of the town went to the bar: it was {crowded}.")
        if view.persona:
            lines.append(f"\n# Character\n{view.persona}\n")
        lines.append('Do you go to the bar? Answer "go" or "stay", with no other text.\nAnswer:')
        return Prompt(system=system, user="\n".join(lines))
