"""The volunteer's dilemma, as a populace simulation plugin written outside populace.

Agents play in groups. Each may volunteer at a cost; if at least one member of a group
volunteers, every member gets the benefit. Everyone wants someone else to volunteer. In the
symmetric mixed equilibrium each agent volunteers with probability
p* = 1 - (cost / benefit) ** (1 / (group_size - 1)), so a group goes without a volunteer with
probability (cost / benefit) ** (group_size / (group_size - 1)) (Diekmann 1985).

It imports only populace's public plugin interface, `populace.plugin`, and does not know the
name it is installed under (the entry-point name is the plugin's name).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from pydantic import Field, model_validator

from populace.plugin import (
    INVALID,
    AgentView,
    BooleanAction,
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

VOLUNTEER = 1.0  # a boolean action's value: 1 is its true label


class VolunteerParams(Params):
    benefit: float = Field(
        10.0,
        gt=0,
        le=1e6,
        title="Benefit",
        description="what every member of a group gets when at least one volunteers",
    )
    cost: float = Field(
        2.0, gt=0, le=1e6, title="Cost", description="what volunteering costs the volunteer"
    )
    group_size: int = Field(
        5,
        ge=2,
        le=10_000,
        title="Group size",
        description="agents per group (the last may be smaller)",
    )

    @model_validator(mode="after")
    def _a_dilemma(self) -> VolunteerParams:
        if self.cost >= self.benefit:
            message = "less than benefit: otherwise nobody gains by volunteering"
            raise_invalid("VolunteerParams", [(("cost",), message, self.cost)])
        return self


def equilibrium_chance(params: VolunteerParams) -> float:
    """The symmetric mixed equilibrium's chance of volunteering."""
    return 1.0 - (params.cost / params.benefit) ** (1.0 / (params.group_size - 1))


class Equilibrium(RulePolicy):
    """Volunteers with the symmetric equilibrium's probability."""

    def decide(self, params: VolunteerParams, policy: Params, observation: Observation):
        chance = equilibrium_chance(params)
        return (observation.uniforms(0) < chance).astype(np.float64)


class FixedChanceParams(Params):
    chance: float = Field(
        0.5, ge=0, le=1, title="Chance of volunteering", description="the same every round"
    )


class FixedChance(RulePolicy):
    """Volunteers with the same chance every round."""

    params = FixedChanceParams

    def decide(self, params: VolunteerParams, policy: FixedChanceParams, observation: Observation):
        return (observation.uniforms(0) < policy.chance).astype(np.float64)


class VolunteersDilemma(Simulation):
    title = "Volunteer's dilemma"
    description = (
        "Groups where one volunteer, at a cost to itself, gives everyone a benefit: who will "
        "step up? (an out-of-tree example plugin)"
    )
    params = VolunteerParams
    metrics = (
        Metric(
            "volunteer_share",
            "Volunteered",
            description="Share of answering agents that volunteered",
        ),
        Metric(
            "success_share",
            "Groups helped",
            description="Share of groups with at least one volunteer",
        ),
        Metric("mean_payoff", "Mean payoff", description="Mean payoff of the answering agents"),
        Metric("n_valid", "Valid answers", type="integer", unit="agents"),
        Metric("n_invalid", "Invalid answers", type="integer", unit="agents"),
    )
    policies = (
        PolicySupport(
            "equilibrium",
            "Equilibrium",
            "volunteers with the symmetric equilibrium's probability",
            rule=Equilibrium,
        ),
        PolicySupport(
            "fixed_chance", "Fixed chance", "volunteers with a set chance", rule=FixedChance
        ),
        llm_policy("a language model decides whether each agent volunteers"),
    )
    default_policy = "equilibrium"
    convergence_metric = "volunteer_share"

    def action(self, params: VolunteerParams) -> BooleanAction:
        return BooleanAction(true_label="volunteer", false_label="abstain")

    def group_size(self, params: VolunteerParams) -> int:
        return params.group_size

    def resolve(self, params: VolunteerParams, actions: RoundActions) -> Resolution:
        valid = actions.valid
        volunteered = valid & (actions.values == VOLUNTEER)
        groups = agent_numbers(actions.agent_ids) // params.group_size
        n_groups = int(groups.max()) + 1 if len(groups) else 0
        volunteers = np.bincount(groups, weights=volunteered, minlength=n_groups)
        answered = np.bincount(groups, weights=valid, minlength=n_groups) > 0
        helped = volunteers > 0
        payoff = params.benefit * helped[groups] - params.cost * volunteered
        n_valid = int(valid.sum())
        metrics: dict[str, MetricValue] = {
            "n_valid": n_valid,
            "n_invalid": actions.count(INVALID),
            "volunteer_share": None,
            "success_share": None,
            "mean_payoff": None,
        }
        if n_valid:
            metrics |= {
                "volunteer_share": int(volunteered.sum()) / n_valid,
                "success_share": int(helped[answered].sum()) / int(answered.sum()),
                "mean_payoff": exact_sum(payoff[valid]) / n_valid,
            }
        return Resolution(metrics, groups={"volunteers": volunteers})

    def feedback(self, params: VolunteerParams, metrics: Mapping[str, MetricValue]):
        share = metrics["volunteer_share"]
        return None if share is None else {"volunteer_share": share}

    def render(self, params: VolunteerParams, view: AgentView) -> Prompt:
        """The rules, the round, how many of its group volunteered last round, the agent's
        character, then the question (the answer is held to the action's two labels)."""
        system = (
            f"You are in a group of {params.group_size}. Each round, if at least one of you "
            f"volunteers, everyone in the group gets {params.benefit:g} points; volunteering "
            f"costs the volunteer {params.cost:g} points."
        )
        lines = [f"This is round {view.round}."]
        if "volunteers" in view.group:
            lines.append(f"Last round {view.group['volunteers']:g} of your group volunteered.")
        if view.persona:
            lines.append(f"\n# Character\n{view.persona}\n")
        lines.append('Do you volunteer? Answer "volunteer" or "abstain", with no other text.')
        lines.append("Answer:")
        return Prompt(system=system, user="\n".join(lines))
