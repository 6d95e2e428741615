"""The guessing game of the AgentScope large-scale paper, as the built-in plugin `guess`.

Every agent picks a number in [min, max]; the target is ratio * mean + offset, and whoever is
closest wins. Written with populace.plugin only. Its params own the game's rule and feedback
fields, and its environment resolves each round (the statistics, the target and the winners) and
tells agents the winning number. The workers' side of a round (the policies, the prompts, the
partial aggregates) is still the runtime's own (issue 27 moves it behind the plugin next).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal

import numpy as np
from pydantic import Field, model_validator

from populace.plugin import (
    INVALID,
    Metric,
    MetricValue,
    NumberAction,
    Params,
    PolicySupport,
    Resolution,
    RoundActions,
    Simulation,
    exact_sum,
    raise_invalid,
)

# The game's numbers stay well inside float64's exact integers, so sums over 10^6 agents stay
# exact enough.
MAX_ABS_BOUND = 1e6
MAX_RATIO = 1.5
PRESETS: dict[str, tuple[float, float]] = {
    "2/3": (2 / 3, 0.0),
    "1/2+5": (0.5, 5.0),
    "51/100": (0.51, 0.0),
}
# Winners listed by id in a round's record; their count is always exact.
WINNER_AGENTS_CAP = 100
Bound = Annotated[float, Field(allow_inf_nan=False, ge=-MAX_ABS_BOUND, le=MAX_ABS_BOUND)]


class RuleConfig(Params):
    """target = ratio * mean + offset over [min, max]; a preset names the paper's rules."""

    preset: Literal["2/3", "1/2+5", "51/100"] | None = Field(
        None,
        title="Preset",
        description="one of the paper's rules: `2/3` (ratio 2/3), `1/2+5` (ratio 1/2, offset 5), "
        "`51/100`; give it or `ratio`, not both",
    )
    ratio: Annotated[float, Field(gt=0, le=MAX_RATIO, allow_inf_nan=False)] | None = Field(
        None, title="Ratio", description="target = ratio x mean + offset; required without a preset"
    )
    offset: Bound | None = Field(
        None, title="Offset", description="added to ratio x mean (0 when left out)"
    )
    min: Bound = Field(0.0, title="Smallest number", description="smallest allowed guess")
    max: Bound = Field(
        100.0, title="Largest number", description="largest allowed guess, greater than `min`"
    )

    @model_validator(mode="after")
    def _consistent(self) -> RuleConfig:
        problems = []
        if self.preset is not None:
            for name in ("ratio", "offset"):
                if getattr(self, name) is not None:
                    problems.append(((name,), f"give preset or {name}, not both", None))
        elif self.ratio is None:
            problems.append((("ratio",), "required unless a preset is given", None))
        if not self.min < self.max:
            problems.append(
                (("max",), f"max ({self.max:g}) must be greater than min ({self.min:g})", self.max)
            )
        raise_invalid("RuleConfig", problems)
        return self

    @property
    def resolved(self) -> tuple[float, float]:
        """(ratio, offset)."""
        if self.preset is not None:
            return PRESETS[self.preset]
        return float(self.ratio), float(self.offset or 0.0)


class FeedbackConfig(Params):
    """Between rounds agents are always told the winning number; optionally the mean too."""

    mean: bool = Field(
        False, title="Tell the mean", description="also tell agents each round's mean"
    )


class GuessParams(Params):
    rule: RuleConfig = Field(default_factory=lambda: RuleConfig(preset="2/3"), title="Rule")
    feedback: FeedbackConfig = Field(default_factory=FeedbackConfig, title="Feedback")


class GuessingGame(Simulation):
    title = "Guessing game"
    description = (
        "Everyone picks a number; whoever is closest to a ratio of the mean (plus an offset) "
        "wins (the AgentScope large-scale simulation paper)."
    )
    params = GuessParams
    metrics = (
        Metric("mean", "Mean guess", description="Mean of the valid guesses"),
        Metric("median", "Median guess", description="Median of the valid guesses"),
        Metric(
            "std",
            "Standard deviation",
            description="Population standard deviation of the valid guesses",
        ),
        Metric("min", "Lowest guess", description="Lowest valid guess"),
        Metric("max", "Highest guess", description="Highest valid guess"),
        Metric(
            "target",
            "Target",
            description="The rule's ratio × mean + offset: the number to be closest to",
        ),
        Metric(
            "winner_value",
            "Winning guess",
            description="The valid guess closest to the target (the lower one on a tie)",
        ),
        Metric(
            "winner_count",
            "Winners",
            type="integer",
            unit="agents",
            description="Agents who chose the winning guess",
        ),
        Metric(
            "n_valid",
            "Valid answers",
            type="integer",
            unit="agents",
            description="Agents whose answer was a number in the rule's range",
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
        PolicySupport("level_k", "Level-k", "depth-k reasoners, by attribute"),
        PolicySupport("synthetic", "Synthetic", "seeded random numbers"),
        PolicySupport("llm", "LLM", "a language model answers each agent", uses_llm=True),
    )
    default_policy = "level_k"
    convergence_metric = "mean"

    def action(self, params: GuessParams) -> NumberAction:
        return NumberAction(params.rule.min, params.rule.max)

    def resolve(self, params: GuessParams, actions: RoundActions) -> Resolution:
        valid = actions.valid
        values, ids = actions.values[valid], actions.agent_ids[valid]
        metrics: dict[str, MetricValue] = {m.name: None for m in self.metrics}
        metrics |= {
            "n_valid": len(values),
            "n_invalid": actions.count(INVALID),
            "winner_count": 0,
        }
        if not len(values):
            return Resolution(metrics, {"winners": []})
        ratio, offset = params.rule.resolved
        # An exactly rounded sum: the mean, and with it the target, the winning number and the
        # next round, do not depend on how the agents were spread over workers.
        mean = exact_sum(values) / len(values)
        target = ratio * mean + offset
        winner, winner_count, winners = closest(ids, values, target)
        metrics |= {
            "mean": mean,
            "median": float(np.median(values)),
            "std": float(np.sqrt(np.mean((values - mean) ** 2))),
            "min": float(values.min()),
            "max": float(values.max()),
            "target": target,
            "winner_value": winner,
            "winner_count": winner_count,
        }
        return Resolution(metrics, {"winners": winners})

    def feedback(self, params: GuessParams, metrics: Mapping[str, MetricValue]) -> dict | None:
        # A round without a valid answer tells nothing: the last winning number still stands.
        if metrics["winner_value"] is None:
            return None
        told = {"winner": metrics["winner_value"]}
        if params.feedback.mean and metrics["mean"] is not None:
            told["mean"] = metrics["mean"]
        return told


def closest(
    ids: np.ndarray, values: np.ndarray, target: float, cap: int = WINNER_AGENTS_CAP
) -> tuple[float, int, list[int]]:
    """(winning value, how many chose it, the first `cap` of them by id).

    Winners are the agents closest to the target; when two different values are equally close
    (one above, one below) the lower one wins, so the outcome never depends on order.
    """
    distance = np.abs(values - target)
    nearest = distance == distance.min()
    value = float(values[nearest].min())
    chose = ids[values == value]
    return value, len(chose), chose[:cap].tolist()
