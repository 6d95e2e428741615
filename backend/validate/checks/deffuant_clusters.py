"""Deffuant on complete graphs settles into about ⌊1/(2ε)⌋ major opinion clusters (Weisbuch et
al. 2002; issue 29: ε = 0.25 → 2, ε = 0.1 → 4–6), played on the bounded-confidence check's
population of disjoint cliques (each an independent complete graph)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from backend.validate import figures
from backend.validate.context import Context
from backend.validate.result import FAIL, PASS, CheckResult
from backend.validate.runs import values_of

FIRST_SEED = 300
TOLERANCE = 1e-4  # the plugin's stop rule: nobody moves more than this
MAJOR_SHARE = 0.05  # a cluster of at least this share of a replica's agents is major


@dataclass(frozen=True)
class ClusterCase:
    name: str
    epsilon: float
    low: int  # the mean count of major clusters must lie in [low, high]
    high: int

    @property
    def title(self) -> str:
        span = str(self.low) if self.low == self.high else f"{self.low}–{self.high}"
        return f"Deffuant on complete graphs, ε = {self.epsilon:g}: about {span} major clusters"


CASES = (
    ClusterCase("deffuant.clusters_0.25", 0.25, 2, 2),
    ClusterCase("deffuant.clusters_0.1", 0.1, 4, 6),
)
# The mean over replicas may stray this far outside [low, high] (a replica caught merging, an
# outlier group just over the major share).
SLACK = 0.5

HOW = (
    "Each clique is a complete graph with its own uniform start; pairs meet along its edges "
    "(a random matching each round) and move halfway towards each other when closer than ε "
    "(μ 0.5). After the run a replica's sorted opinions are split wherever two consecutive ones "
    "are more than ε/2 apart (settled clusters are more than ε apart; within one the opinions "
    f"meet), and a cluster holding at least {MAJOR_SHARE:.0%} of the replica's agents is major. "
    "Measured: the mean number of major clusters over the replicas. Reference: about "
    "⌊1/(2ε)⌋ (Weisbuch, Deffuant, Amblard and Nadal 2002); a reference simulation of the same "
    "rule with random perfect matchings (N = 500, 100 to 200 rounds) gives 2 at ε = 0.25 in 90 "
    "to 95 % of starts and 4–5 at ε = 0.1. The plugin's matching (locally dominant: not "
    "maximal) pairs fewer agents a round, so it takes about twice the rounds: after 100 the "
    "replicas at ε = 0.1 are not settled (a mean of 2.8), after 200 they are (4.4)."
)


def major_clusters(opinions: np.ndarray, epsilon: float) -> int:
    """How many clusters of one replica's final opinions hold >= MAJOR_SHARE of its agents."""
    ordered = np.sort(opinions[~np.isnan(opinions)])
    if ordered.size == 0:
        return 0
    cuts = np.flatnonzero(np.diff(ordered) > epsilon / 2)
    sizes = np.diff(np.concatenate(([0], cuts + 1, [ordered.size])))
    return int(np.count_nonzero(sizes >= MAJOR_SHARE * ordered.size))


def run(context: Context, population: int) -> list[CheckResult]:
    counts: dict[float, list[int]] = {}
    results = []
    for case in CASES:
        result, found = _run_case(context, population, case)
        results.append(result)
        counts[case.epsilon] = found
    figure = figures.clusters(context.out, counts, {c.epsilon: (c.low, c.high) for c in CASES})
    for result in results:
        result.figure = figure
    return results


def _config(context: Context, population: int, case: ClusterCase, seed: int) -> dict:
    """One Deffuant run (mu 0.5) on the cliques, stopped by the plugin's tolerance."""
    return {
        "population_id": population,
        "name": f"validate deffuant clusters eps={case.epsilon:g}",
        "rounds": context.sizes.deffuant_rounds,
        "seed": seed,
        "plugin": {
            "name": "bounded_confidence",
            "params": {
                "model": "deffuant",
                "epsilon": case.epsilon,
                "mu": 0.5,
                "tolerance": TOLERANCE,
            },
        },
    }


def _run_case(context: Context, population: int, case: ClusterCase):
    sizes = context.sizes
    k, cliques = sizes.deffuant_clique, sizes.deffuant_cliques
    started = time.monotonic()
    found: list[int] = []
    ids, rounds = [], []
    for index in range(sizes.deffuant_runs):
        played = context.runs.simulate(_config(context, population, case, FIRST_SEED + index))
        last = len(played.rounds)
        values = values_of(context.runs.export_csv(played.simulation_id, round=last))
        replica = values.agent // k
        found += [major_clusters(values.value[replica == r], case.epsilon) for r in range(cliques)]
        ids.append(played.simulation_id)
        rounds.append(last)
    mean = float(np.mean(found))
    ok = case.low - SLACK <= mean <= case.high + SLACK
    tally = {int(n): int(c) for n, c in zip(*np.unique(found, return_counts=True), strict=True)}
    context.say(
        f"  deffuant ε = {case.epsilon:g}: replicas by major clusters {tally}, mean {mean:.2f}"
    )
    target = (case.low + case.high) / 2
    return (
        CheckResult(
            case.name,
            case.title,
            target,
            mean,
            f"mean in [{case.low - SLACK:g}, {case.high + SLACK:g}]",
            PASS if ok else FAIL,
            reason="" if ok else f"a mean of {mean:.2f} major clusters per replica",
            how=HOW,
            sizes={
                "clique": k,
                "cliques_per_run": cliques,
                "runs": sizes.deffuant_runs,
                "replicas": len(found),
                "round_limit": sizes.deffuant_rounds,
                "rounds": rounds,
            },
            details={
                "major_clusters": {str(n): c for n, c in tally.items()},
                "simulation_ids": ids,
            },
            seconds=time.monotonic() - started,
        ),
        found,
    )
