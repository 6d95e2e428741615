"""The guessing game played by the --llm model, 10 players with the AgentScope paper's
education personas: basic against chain-of-thought prompts, a ratio sweep (1/2, 2/3, 51/100,
4/3: the paper saw models answer 51/100 as if it were the memorised 2/3 game) and temperatures
0, 0.7 and 1.0. The 2/3 run is put beside GAMA-Bench's rows; the others beside the 2/3 run and
their equilibrium."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from backend.validate import gama
from backend.validate.checks.llm_games import AGENT_DEADLINE_S, NOT_JUDGED, validity, validity_words
from backend.validate.context import EDUCATION, Context
from backend.validate.result import REPORTED, CheckResult, not_run
from backend.validate.runs import Run

PLAYERS = 10
SEED = 7
BASELINE_TEMPERATURE = 0.7
# Chain of thought writes its reasoning first: enough for a few steps and the answer line.
COT_MAX_TOKENS = 256
BESIDE_BASELINE = "not judged: beside the 2/3 basic run and the equilibrium"


@dataclass(frozen=True)
class Variant:
    key: str
    label: str
    rule: dict
    equilibrium: float  # where best responses lead: 0 for ratios below 1, the maximum above
    user: str = "basic"
    temperature: float = BASELINE_TEMPERATURE
    extra: dict = field(default_factory=dict)


BASELINE = Variant("basic", "2/3, basic", {"preset": "2/3"}, 0.0)
VARIANTS = (
    BASELINE,
    Variant(
        "cot",
        "2/3, chain of thought",
        {"preset": "2/3"},
        0.0,
        user="cot",
        extra={"max_tokens": COT_MAX_TOKENS},
    ),
    Variant("ratio_1_2", "1/2", {"ratio": 0.5}, 0.0),
    Variant("ratio_51_100", "51/100", {"preset": "51/100"}, 0.0),
    Variant("ratio_4_3", "4/3", {"ratio": 4 / 3, "min": 0, "max": 100}, 100.0),
    Variant("temperature_0", "2/3, temperature 0", {"preset": "2/3"}, 0.0, temperature=0.0),
    Variant("temperature_1", "2/3, temperature 1.0", {"preset": "2/3"}, 0.0, temperature=1.0),
)


def _title(variant: Variant, model: str) -> str:
    return f"Guessing game ({PLAYERS} players, {variant.label}): {model}"


def by_education(rounds: list[dict]) -> dict[str, float]:
    """Each education level's mean guess over the run (weighted by valid answers)."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for r in rounds:
        for category, seg in (r.get("segments") or {}).get("education", {}).items():
            if seg.get("mean") is not None and seg.get("count"):
                sums[category] = sums.get(category, 0.0) + seg["mean"] * seg["count"]
                counts[category] = counts.get(category, 0) + seg["count"]
    return {c: sums[c] / counts[c] for c in EDUCATION if counts.get(c)}


def _against_baseline(variant: Variant, series: list[float], baseline: float | None) -> str:
    """The variant beside the basic 2/3 run and its equilibrium, in plain words."""
    if variant is BASELINE or not series or baseline is None:
        return ""
    mean, last = float(np.mean(series)), series[-1]
    text = (
        f" Its mean guess {mean:.1f} against {baseline:.1f} in the 2/3 basic run; the "
        f"equilibrium is {variant.equilibrium:g}."
    )
    if min(series) == max(series) and last in (0.0, 100.0):  # the range's ends
        text += f" Every player answered {last:g} in every round."
    if variant.key == "ratio_51_100" and abs(mean - baseline) < 5:
        text += " It played 51/100 much as it played 2/3, as the paper saw of larger models."
    if variant.key == "ratio_4_3":
        if last >= 90:
            text += " Guesses climbed to the maximum."
        elif mean > baseline + 10:
            text += (
                f" Guesses rose above the 2/3 run's but stayed far from the maximum (last "
                f"round {last:.1f}): the model only partly took in that the target is above "
                "the mean."
            )
        else:
            text += (
                " Guesses did not climb towards the maximum: the model did not take in that "
                "the target is above the mean."
            )
    return text


def _simulate(context: Context, population: int, variant: Variant, rounds: int) -> Run:
    return context.runs.simulate(
        {
            "population_id": population,
            "name": f"validate guess {variant.label} {context.llm.label}",
            "rounds": rounds,
            "seed": SEED,
            "plugin": {"name": "guess", "params": {"rule": variant.rule}},
            "prompt": {"system": "roleplay", "user": variant.user},
            "policy": context.llm.policy(variant.temperature, **variant.extra),
            "deadlines": {"agent_s": AGENT_DEADLINE_S},
            "segment_by": ["education"],
        }
    )


def _finding(
    model: str,
    variant: Variant,
    series: list,
    valid: list[float],
    published: list,
    baseline_mean: float | None,
    education: dict[str, float],
    gates: dict,
) -> str:
    """The run in plain words: beside GAMA-Bench's rows, the baseline, and by education."""
    finding = gama.describe(model, series, published, "mean guess", 100.0)
    finding += _against_baseline(variant, valid, baseline_mean)
    if education:
        finding += " By education: " + ", ".join(f"{c} {m:.1f}" for c, m in education.items()) + "."
    return finding + validity_words(gates)


def run(context: Context) -> list[CheckResult]:
    llm = context.llm
    if llm is None:
        return [
            not_run(f"llm.guess.{v.key}", _title(v, "no model"), "no --llm given") for v in VARIANTS
        ]
    if "guess" not in context.plugins:
        reason = "the plugin guess is not installed on the manager"
        return [not_run(f"llm.guess.{v.key}", _title(v, llm.label), reason) for v in VARIANTS]
    population = context.education_population("llm-guess", PLAYERS, personas=True)
    results, baseline_mean = [], None
    for variant in VARIANTS:
        started = time.monotonic()
        rounds = (
            context.sizes.llm_cot_rounds
            if variant.user == "cot"
            else context.sizes.llm_guess_rounds
        )
        played = _simulate(context, population, variant, rounds)
        series = played.metric("mean")
        valid = [v for v in series if v is not None]
        mean = float(np.mean(valid)) if valid else None
        published = gama.rows("guessing") if variant is BASELINE else []
        gates = validity(played)
        education = by_education(played.rounds)
        finding = _finding(
            llm.label, variant, series, valid, published, baseline_mean, education, gates
        )
        if variant is BASELINE:
            baseline_mean = mean
        context.say(f"  llm.guess.{variant.key}: {finding}")
        results.append(
            CheckResult(
                f"llm.guess.{variant.key}",
                _title(variant, llm.label),
                None,
                mean,
                NOT_JUDGED if variant is BASELINE else BESIDE_BASELINE,
                REPORTED,
                how=f"Measured: the mean guess each round and over the run ({variant.user} "
                f"prompt, temperature {variant.temperature:g}, seed {SEED}); personas by "
                "education level, two players each.",
                sizes={"players": PLAYERS, "rounds": rounds},
                details={
                    "variant": variant.label,
                    "by_round": series,
                    "by_education": education,
                    "equilibrium": variant.equilibrium,
                    "reference": {r.model: r.by_round for r in published},
                    "simulation_id": played.simulation_id,
                    **gates,
                },
                finding=finding,
                seconds=time.monotonic() - started,
            )
        )
    return results
