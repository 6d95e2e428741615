"""GAMA-Bench's public goods and El Farol games played by the --llm model, each beside the
published rows (gama.py): reported in plain words, not judged against other models."""

from __future__ import annotations

import time
from dataclasses import dataclass

from backend.validate import gama
from backend.validate.context import Context
from backend.validate.result import REPORTED, CheckResult, not_run
from backend.validate.runs import Run

PLAYERS = 10
SEED = 5
# GAMA-Bench plays its games at temperature 1 by default.
TEMPERATURE = 1.0
NOT_JUDGED = "not judged: beside GAMA-Bench's published rows"
AGENT_DEADLINE_S = 300


@dataclass(frozen=True)
class Game:
    name: str  # the check's name
    plugin: str
    params: dict
    reference: str  # the game's key in gama_bench.json
    metric: str  # the plugin's per-round metric compared with the rows
    what: str  # the metric in words
    scale: float  # the metric's range (1 for shares)
    title: str


GAMES = (
    Game(
        "llm.public_goods",
        "public_goods",
        {"endowment": 20, "multiplier": 2, "group_size": PLAYERS},
        "public_goods",
        "mean_contribution",
        "mean contribution (tokens of 20)",
        20.0,
        f"Public goods ({PLAYERS} players, endowment 20, multiplier 2)",
    ),
    Game(
        "llm.el_farol",
        "el_farol",
        {"capacity_share": 0.6, "group_size": PLAYERS},
        "el_farol",
        "go_ratio",
        "share of players going",
        1.0,
        f"El Farol ({PLAYERS} players, capacity 60 %)",
    ),
)


def validity(run: Run) -> dict:
    """The run's validity gates, as the manager recorded them."""
    return {
        "participation": [r.get("participation") for r in run.rounds],
        "parse_failure_rate": [r.get("parse_failure_rate") for r in run.rounds],
        "rounds_below_floor": run.rounds_below_floor,
    }


def validity_words(gates: dict) -> str:
    below = gates["rounds_below_floor"]
    shares = [p for p in gates["participation"] if p is not None]
    lowest = f"lowest participation {min(shares):.0%}" if shares else "no participation recorded"
    if below:
        return f" Not a whole run: {below} round(s) below the participation floor ({lowest})."
    return f" Every round above the participation floor ({lowest})."


def run(context: Context) -> list[CheckResult]:
    if context.llm is None:
        return [not_run(g.name, g.title, "no --llm given") for g in GAMES]
    llm = context.llm
    population = context.population("llm-games", PLAYERS)
    results = []
    for game in GAMES:
        title = f"{game.title}: {llm.label}"
        if game.plugin not in context.plugins:
            reason = f"the plugin {game.plugin} is not installed on the manager"
            results.append(not_run(game.name, title, reason))
            continue
        started = time.monotonic()
        rounds = context.sizes.llm_rounds
        played = context.runs.simulate(
            {
                "population_id": population,
                "name": f"validate {game.plugin} {llm.label}",
                "rounds": rounds,
                "seed": SEED,
                "plugin": {"name": game.plugin, "params": game.params},
                "policy": llm.policy(TEMPERATURE),
                "deadlines": {"agent_s": AGENT_DEADLINE_S},
            }
        )
        series = played.metric(game.metric)
        published = gama.rows(game.reference)
        gates = validity(played)
        finding = gama.describe(llm.label, series, published, game.what, game.scale)
        finding += validity_words(gates)
        if human := gama.humans(game.reference):
            finding += f" Humans: {human}"
        context.say(f"  {game.name}: {finding}")
        valid = [v for v in series if v is not None]
        results.append(
            CheckResult(
                game.name,
                title,
                None,
                sum(valid) / len(valid) if valid else None,
                NOT_JUDGED,
                REPORTED,
                how=f"Measured: the {game.what} each round, and its mean over the rounds "
                f"(temperature {TEMPERATURE:g}, seed {SEED}). Published rows: "
                f"{gama.source()['repository']}.",
                sizes={"players": PLAYERS, "rounds": rounds},
                details={
                    "variant": llm.label,
                    "by_round": series,
                    "reference": {r.model: r.by_round for r in published},
                    "simulation_id": played.simulation_id,
                    **gates,
                },
                finding=finding,
                seconds=time.monotonic() - started,
            )
        )
    return results
