"""The guessing game with level-k agents (the runtime's `level_k` policy: level 0 repeats last
round's winning number, level k best-responds to level k - 1, x_k = ratio·x_{k-1} + offset,
plus noise): with 1/2·mean + 5 the mean converges to the equilibrium 10; with a ratio above 1
it climbs to the maximum."""

from __future__ import annotations

import time
from dataclasses import dataclass

from backend.validate import figures
from backend.validate.context import Context
from backend.validate.result import CheckResult, not_run, within

DEPTHS = {
    "primary school": 0,
    "high school": 1,
    "bachelor's degree": 1,
    "master's degree": 2,
    "doctorate": 3,
}
NOISE_STD = 2.0
ROUNDS = 15
SEED = 9


@dataclass(frozen=True)
class Rule:
    name: str
    label: str
    rule: dict
    target: float
    tolerance: float
    how: str


RULES = (
    Rule(
        "guess.half_plus_5",
        "1/2·mean + 5",
        {"preset": "1/2+5"},
        10.0,
        0.5,
        "The rule's fixed point: x = x/2 + 5 gives 10, and level-k best responses contract "
        "towards it by half a step per level. Measured: the last round's mean guess.",
    ),
    Rule(
        "guess.ratio_4_3",
        "4/3·mean",
        {"ratio": 4 / 3, "offset": 0, "min": 0, "max": 100},
        100.0,
        1.0,
        "With ratio 4/3 every best response is a third above the anchor, so guesses grow "
        "until the range's maximum holds them (noise below it keeps the mean a little under "
        "100). Measured: the last round's mean guess.",
    ),
)


def run(context: Context) -> list[CheckResult]:
    if "guess" not in context.plugins:
        reason = "the plugin guess is not installed on the manager"
        return [not_run(r.name, _title(r), reason) for r in RULES]
    agents = context.sizes.guess_agents
    population = context.education_population("guess", agents)
    results, series = [], {}
    for rule in RULES:
        started = time.monotonic()
        played = context.runs.simulate(
            {
                "population_id": population,
                "name": f"validate guess {rule.label}",
                "rounds": ROUNDS,
                "seed": SEED,
                "plugin": {"name": "guess", "params": {"rule": rule.rule}},
                "policy": {
                    "kind": "level_k",
                    "depth_attribute": "education",
                    "depth_by_category": DEPTHS,
                    "default_depth": 1,
                    "noise_std": NOISE_STD,
                },
            }
        )
        means = played.metric("mean")
        series[rule.label] = means
        context.say(f"  guess {rule.label}: mean {means[0]:.2f} -> {means[-1]:.3f}")
        results.append(
            CheckResult(
                rule.name,
                _title(rule),
                rule.target,
                means[-1],
                f"± {rule.tolerance:g}",
                within(means[-1], rule.target, rule.tolerance),
                how=rule.how,
                sizes={"agents": agents, "rounds": ROUNDS},
                details={
                    "mean_by_round": means,
                    "noise_std": NOISE_STD,
                    "depths": DEPTHS,
                    "simulation_id": played.simulation_id,
                },
                seconds=time.monotonic() - started,
            )
        )
    figure = figures.guess(context.out, series, {r.label: r.target for r in RULES})
    for result in results:
        result.figure = figure
    return results


def _title(rule: Rule) -> str:
    return f"Guessing game, level-k, {rule.label}: mean converges to {rule.target:g}"
