"""Bounded confidence on complete graphs: Hegselmann–Krause reaches consensus in >= 95 % of
replicas at ε = 0.25 and in < 50 % at ε = 0.15 (Fortunato 2005), and the Deffuant entry,
refused until the plugin offers `model: deffuant`.

Network simulations refuse a `complete` graph (they need stored edges), so a complete graph is
a clique: a population of disjoint cliques is that many independent complete graphs, each with
its own uniform start, played in one run."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from backend.client import ApiError
from backend.validate import figures
from backend.validate.checks import deffuant_clusters
from backend.validate.context import Context
from backend.validate.result import FAIL, PASS, CheckResult, not_run
from backend.validate.runs import values_of

TOLERANCE = 1e-4  # the plugin's stop rule: nobody moves more than this
FIRST_SEED = 100


@dataclass(frozen=True)
class Case:
    """One entry of the table: a model, its confidence bound, and what must hold."""

    name: str
    model: str
    epsilon: float
    at_least: float | None = None  # consensus share >= this
    below: float | None = None  # consensus share < this
    most_runs: int | None = None  # fewer runs than the sizes say (a slower model)
    round_limit: int | None = None  # fewer rounds than the sizes say (a model never at rest)

    @property
    def title(self) -> str:
        rule = f">= {self.at_least:.0%}" if self.at_least is not None else f"< {self.below:.0%}"
        label = "Hegselmann–Krause" if self.model == "hegselmann_krause" else "Deffuant"
        return f"{label} on complete graphs, ε = {self.epsilon:g}: consensus in {rule} of replicas"


CASES = (
    Case("hk.consensus_0.25", "hegselmann_krause", 0.25, at_least=0.95),
    Case("hk.consensus_0.15", "hegselmann_krause", 0.15, below=0.5),
    # Issue 29's Deffuant entry; refused (not run) until the plugin offers the model.
    Case("deffuant.consensus_0.5", "deffuant", 0.5, at_least=0.95, most_runs=1, round_limit=60),
)

HOW = (
    "Each clique is a complete graph with its own uniform start. After the run a replica is at "
    "consensus when its opinions' spread is at most ε (then everyone trusts everyone and "
    "they meet); it is not when its sorted opinions have a gap above ε (groups that far apart "
    "never interact again on a complete graph); otherwise it is undecided at the round limit. "
    "Undecided replicas count against the check: as not at consensus for a lower bound, as at "
    "consensus for an upper bound. Reference: Fortunato (2005), consensus threshold of HK on "
    "complete graphs about 0.2."
)


def classify(opinions: np.ndarray, epsilon: float) -> str:
    """'consensus', 'split' or 'undecided' for one replica's final opinions."""
    ordered = np.sort(opinions[~np.isnan(opinions)])
    if ordered.size == 0:
        return "undecided"
    if ordered[-1] - ordered[0] <= epsilon:
        return "consensus"
    if np.any(np.diff(ordered) > epsilon):
        return "split"
    return "undecided"


def run(context: Context) -> list[CheckResult]:
    if "bounded_confidence" not in context.plugins:
        reason = "the plugin bounded_confidence is not installed on the manager"
        return [not_run(c.name, c.title, reason) for c in CASES]
    sizes = context.sizes
    playing = (sizes.hk_clique, sizes.hk_cliques)  # the cliques the population holds
    population = _cliques(context, *playing)
    results, shares = [], {}
    for case in CASES:
        wanted = playing
        if case.model == "deffuant":
            wanted = (sizes.deffuant_clique, sizes.deffuant_cliques)
        if wanted != playing:
            # Deffuant plays smaller cliques at full size (a clique of 10^4 holds 10^8
            # neighbour entries, and its rounds cost as much): the large ones go first.
            context.runs.release(population)
            population, playing = _cliques(context, *wanted), wanted
        result = _run_case(context, population, case, *playing)
        results.append(result)
        if case.model == "hegselmann_krause" and result.verdict != "not run":
            shares[case.epsilon] = (result.details["lowest_share"], result.details["highest_share"])
    if shares:
        figure = figures.hk(context.out, shares)
        for result in results:
            if result.name.startswith("hk."):
                result.figure = figure
    if deffuant_offered(results):
        results += deffuant_clusters.run(context, population)
    return results


def _cliques(context: Context, k: int, cliques: int) -> int:
    """A population of `cliques` disjoint complete graphs of k agents."""
    return context.population(
        f"bounded-confidence-{k}", k * cliques, {"kind": "cliques", "size": k}
    )


def deffuant_offered(results: list[CheckResult]) -> bool:
    """Whether the manager played the Deffuant case (a plugin without the model refuses it)."""
    return any(r.name.startswith("deffuant.") and r.verdict != "not run" for r in results)


def _config(population: int, case: Case, limit: int, seed: int) -> dict:
    return {
        "population_id": population,
        "name": f"validate {case.model} eps={case.epsilon:g}",
        "rounds": limit,
        "seed": seed,
        "plugin": {
            "name": "bounded_confidence",
            "params": {"model": case.model, "epsilon": case.epsilon, "tolerance": TOLERANCE},
        },
    }


def _judge(case: Case, lowest: float, highest: float) -> tuple[float, float, str, str]:
    """Target, measured share, tolerance and verdict: undecided replicas count against the
    case's claim (as not at consensus for `at_least`, as at consensus for `below`)."""
    if case.at_least is not None:
        measured, verdict = lowest, PASS if lowest >= case.at_least else FAIL
        target, tolerance = case.at_least, f">= {case.at_least:g} (undecided count as not)"
    else:
        measured, verdict = highest, PASS if highest < case.below else FAIL
        target, tolerance = case.below, f"< {case.below:g} (undecided count as consensus)"
    return target, measured, tolerance, verdict


def _run_case(context: Context, population: int, case: Case, k: int, cliques: int) -> CheckResult:
    sizes = context.sizes
    started = time.monotonic()
    outcomes: list[str] = []
    rounds: list[int] = []
    ids: list[int] = []
    runs = min(sizes.hk_runs, case.most_runs or sizes.hk_runs)
    # Deffuant's pairs keep moving (asymptotic convergence): it stops at the limit.
    limit = min(sizes.hk_rounds, case.round_limit or sizes.hk_rounds)
    for index in range(runs):
        config = _config(population, case, limit, FIRST_SEED + index)
        try:
            played = context.runs.simulate(config)
        except ApiError as exc:
            if exc.status == 422 and index == 0:
                return not_run(
                    case.name, case.title, f"the manager refused model {case.model!r}: {exc.reason}"
                )
            raise
        last = len(played.rounds)
        values = values_of(context.runs.export_csv(played.simulation_id, round=last))
        replica = values.agent // k
        outcomes += [classify(values.value[replica == r], case.epsilon) for r in range(cliques)]
        rounds.append(last)
        ids.append(played.simulation_id)
    replicas = len(outcomes)
    lowest = outcomes.count("consensus") / replicas
    highest = (outcomes.count("consensus") + outcomes.count("undecided")) / replicas
    target, measured, tolerance, verdict = _judge(case, lowest, highest)
    context.say(
        f"  {case.model} ε = {case.epsilon:g}: {outcomes.count('consensus')} of "
        f"{replicas} replicas at consensus, {outcomes.count('undecided')} undecided"
    )
    return CheckResult(
        case.name,
        case.title,
        target,
        measured,
        tolerance,
        verdict,
        how=HOW,
        sizes={
            "clique": k,
            "cliques_per_run": cliques,
            "runs": runs,
            "replicas": replicas,
            "round_limit": limit,
            "rounds": rounds,
        },
        details={
            "consensus": outcomes.count("consensus"),
            "split": outcomes.count("split"),
            "undecided": outcomes.count("undecided"),
            "lowest_share": lowest,
            "highest_share": highest,
            "simulation_ids": ids,
        },
        seconds=time.monotonic() - started,
    )
