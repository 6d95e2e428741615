"""SIR on an Erdős–Rényi graph: the final attack rate against S = 1 - exp(-c T S) above the
threshold, and no large outbreak below it. One population (one graph), one run per c·T."""

from __future__ import annotations

import time

from backend.validate import figures
from backend.validate.context import Context
from backend.validate.references import final_size
from backend.validate.result import FAIL, PASS, CheckResult, not_run, within
from backend.validate.runs import Run

SUPERCRITICAL = (1.5, 2.0, 3.0)
SUBCRITICAL = 0.5
# A large outbreak reaches a positive share of the population; below the threshold the
# expected outbreak is initial / (1 - cT) agents, a few hundredths of a percent here.
SMALL_OUTBREAK = 0.01
SEED = 5
MAX_ROUNDS = 1000

HOW = (
    "With one infectious round, every edge from an infected agent transmits once with "
    "probability T, so the epidemic is bond percolation: on an Erdős–Rényi graph of mean "
    "degree c its final size is the giant component of ER(c·T), the largest root of "
    "S = 1 - exp(-c·T·S), solved here by Newton's method (0 at c·T <= 1). Measured: the last "
    "round's attack_rate ((infectious + recovered) / agents)."
)


def _title(ct: float) -> str:
    if ct <= 1:
        return f"SIR on Erdős–Rényi, c·T = {ct:g}: no large outbreak"
    return f"SIR on Erdős–Rényi, c·T = {ct:g}: final size = 1 - exp(-cT S)"


def _simulate(context: Context, population: int, ct: float, params: dict) -> Run:
    return context.runs.simulate(
        {
            "population_id": population,
            "name": f"validate sir cT={ct:g}",
            "rounds": MAX_ROUNDS,
            "seed": SEED,
            "plugin": {"name": "sir", "params": params},
        }
    )


def _result(
    ct: float, expected: float, attack: float, tolerance: float, common: dict
) -> CheckResult:
    """Below the threshold: no large outbreak; above it: the final size within tolerance."""
    if ct <= 1:
        verdict = PASS if attack < SMALL_OUTBREAK else FAIL
        bound = f"< {SMALL_OUTBREAK:g}"
    else:
        verdict = within(attack, expected, tolerance)
        bound = f"± {tolerance:g}"
    return CheckResult(
        f"sir.final_size_{ct:g}", _title(ct), expected, attack, bound, verdict, **common
    )


def run(context: Context) -> list[CheckResult]:
    every = (SUBCRITICAL, *SUPERCRITICAL)
    if "sir" not in context.plugins:
        reason = "the plugin sir is not installed on the manager"
        return [not_run(f"sir.final_size_{ct:g}", _title(ct), reason) for ct in every]
    sizes = context.sizes
    agents, degree = sizes.sir_agents, sizes.sir_degree
    population = context.population("sir", agents, {"kind": "erdos_renyi", "mean_degree": degree})
    results, points = [], []
    for ct in every:
        started = time.monotonic()
        params = {"transmission": ct / degree, "initial_infected": sizes.sir_initial}
        played = _simulate(context, population, ct, params)
        attack = played.metric("attack_rate")[-1]
        context.say(
            f"  sir c·T = {ct:g}: attack rate {attack:.4f} after {len(played.rounds)} rounds"
        )
        expected = final_size(ct)
        common = {
            "how": HOW,
            "sizes": {
                "agents": agents,
                "mean_degree": degree,
                "rounds": len(played.rounds),
                "initial_infected": sizes.sir_initial,
            },
            "details": {
                "simulation_id": played.simulation_id,
                "transmission": ct / degree,
                "stop_reason": played.stop_reason,
            },
            "seconds": time.monotonic() - started,
        }
        if ct > 1:
            points.append((ct, attack))
        results.append(_result(ct, expected, attack, sizes.sir_tolerance, common))
    figure = figures.sir(
        context.out, points + [(SUBCRITICAL, results[0].measured)], sizes.sir_tolerance
    )
    for result in results:
        result.figure = figure
    return results
