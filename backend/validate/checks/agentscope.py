"""`populace validate --study agentscope`: the figure types of the AgentScope large-scale
simulation paper (Pan et al. 2024), with the --llm model (Gemma 3 270M by default): the
distribution of guesses by round for basic and chain-of-thought prompts, the mean guess by
education level, and the convergence of 1/2·mean + 5 towards 10. The paper played 8-72B models;
the report says in plain words what this model did and where it differs."""

from __future__ import annotations

import time

import numpy as np

from backend.validate import figures
from backend.validate.checks.llm_games import AGENT_DEADLINE_S, NOT_JUDGED, validity, validity_words
from backend.validate.checks.llm_guess import COT_MAX_TOKENS, by_education
from backend.validate.context import EDUCATION, Context
from backend.validate.result import REPORTED, CheckResult, not_run
from backend.validate.runs import Run, values_of

SEED = 11
TEMPERATURE = 0.7
# What the paper reports of its models, for the plain words beside this model's numbers.
PAPER = {
    "basic": "the paper's models guessed 20-40 in round 1 and moved towards 0 over the rounds",
    "cot": "chain of thought lowered the paper's guesses (more steps of reasoning about others)",
    "education": "the paper's agents with more education guessed lower",
    "half_plus_5": "the paper's models converged to the equilibrium 10 within a few rounds",
}
RUNS = (
    ("basic", "2/3 of the mean, basic prompt", {"preset": "2/3"}, "basic"),
    ("cot", "2/3 of the mean, chain of thought", {"preset": "2/3"}, "cot"),
    ("half_plus_5", "1/2·mean + 5, basic prompt", {"preset": "1/2+5"}, "basic"),
)


def _distribution(context: Context, simulation_id: int) -> list[list[float]]:
    """Every valid guess of each round, from the run's export."""
    values = values_of(context.runs.export_csv(simulation_id))
    rounds = sorted(set(values.round.tolist()))
    return [
        [float(v) for v in values.value[(values.round == r) & ~np.isnan(values.value)]]
        for r in rounds
    ]


def _education_words(education: dict[str, float]) -> str:
    if len(education) < 2:
        return ""
    levels = [education[e] for e in EDUCATION if e in education]
    ordered = np.all(np.diff(levels) <= 0)
    text = " By education: " + ", ".join(f"{c} {m:.1f}" for c, m in education.items()) + "."
    if ordered:
        return text + " More education, lower guesses, as in the paper."
    return text + f" Unlike the paper ({PAPER['education']}), the levels are not in that order."


def _play(context: Context, population: int, label: str, rule: dict, user: str, rounds: int) -> Run:
    """One simulation of the guessing game with the --llm model."""
    extra = {"max_tokens": COT_MAX_TOKENS} if user == "cot" else {}
    return context.runs.simulate(
        {
            "population_id": population,
            "name": f"validate agentscope {label}",
            "rounds": rounds,
            "seed": SEED,
            "plugin": {"name": "guess", "params": {"rule": rule}},
            "prompt": {"system": "roleplay", "user": user},
            "policy": context.llm.policy(TEMPERATURE, **extra),
            "deadlines": {"agent_s": AGENT_DEADLINE_S},
            "segment_by": ["education"],
        }
    )


def _finding(model: str, key: str, series: list, valid: list[float]) -> str:
    """The mean guess in plain words, beside what the paper's models did."""
    if len(series) == 1 and valid:
        finding = f"{model}'s mean guess was {valid[0]:.1f}; {PAPER[key]}."
    elif valid:
        finding = (
            f"{model}'s mean guess was {valid[0]:.1f} in round 1 and {valid[-1]:.1f} in "
            f"round {len(series)}; {PAPER[key]}."
        )
    else:
        finding = f"{model} gave no valid guess in any round."
    if key == "half_plus_5" and valid:
        reached = abs(valid[-1] - 10) <= 1
        finding += (
            " It reached the equilibrium 10 (within 1)."
            if reached
            else f" It did not reach the equilibrium 10 (last round {valid[-1]:.1f})."
        )
    return finding


def run(context: Context) -> list[CheckResult]:
    llm = context.llm
    names = [f"agentscope.{key}" for key, *_ in RUNS]
    if llm is None or "guess" not in context.plugins:
        reason = "no --llm given" if llm is None else "the plugin guess is not installed"
        return [not_run(name, name, reason) for name in names]
    sizes = context.sizes
    populations = {
        "basic": context.education_population("agentscope", sizes.study_agents, personas=True),
        # Chain of thought writes a few hundred tokens an answer: a smaller population.
        "cot": context.education_population(
            "agentscope-cot", sizes.study_cot_agents, personas=True
        ),
    }
    results, distributions, means = [], {}, {}
    for key, label, rule, user in RUNS:
        started = time.monotonic()
        population = populations["cot" if user == "cot" else "basic"]
        rounds = sizes.llm_cot_rounds if user == "cot" else sizes.study_rounds
        played = _play(context, population, label, rule, user, rounds)
        series = played.metric("mean")
        distributions[label] = _distribution(context, played.simulation_id)
        means[label] = series
        by_level = by_education(played.rounds)
        valid = [v for v in series if v is not None]
        gates = validity(played)
        finding = _finding(llm.label, key, series, valid)
        finding += _education_words(by_level) + validity_words(gates)
        context.say(f"  agentscope.{key}: {finding}")
        results.append(
            CheckResult(
                f"agentscope.{key}",
                f"AgentScope study, {label}: {llm.label}",
                10.0 if key == "half_plus_5" else None,
                float(np.mean(valid)) if valid else None,
                NOT_JUDGED.replace("GAMA-Bench's published rows", "the paper's findings"),
                REPORTED,
                how=f"Guesses of {len(distributions[label][0]) if distributions[label] else 0} "
                f"agents with education personas (temperature {TEMPERATURE:g}, seed {SEED}).",
                sizes={
                    "agents": sizes.study_cot_agents if user == "cot" else sizes.study_agents,
                    "rounds": rounds,
                },
                details={
                    "variant": label,
                    "by_round": series,
                    "by_education": by_level,
                    "guesses_by_round": distributions[label],
                    "simulation_id": played.simulation_id,
                    **gates,
                },
                finding=finding,
                seconds=time.monotonic() - started,
            )
        )
    figure = figures.agentscope(context.out, distributions, results)
    for result in results:
        result.figure = figure
    return results
