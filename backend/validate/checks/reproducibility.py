"""The same seed gives a byte-identical export: a voter run on cliques (values travel worker to
worker) played twice with one seed, and once with another seed (which must differ, or the
comparison proves nothing). The CSV exports' bytes are compared (SHA-256)."""

from __future__ import annotations

import hashlib
import time

from backend.validate.context import Context
from backend.validate.result import FAIL, PASS, CheckResult, not_run

SEED, OTHER_SEED = 21, 22
TITLE = "Reproducibility: the same seed gives a byte-identical export"


def run(context: Context) -> list[CheckResult]:
    if "voter" not in context.plugins:
        return [not_run("reproducibility.same_seed", TITLE, "the plugin voter is not installed")]
    started = time.monotonic()
    agents = context.sizes.repro_agents
    population = context.population("reproducibility", agents, {"kind": "cliques", "size": 10})
    digests, sizes, ids = [], [], []
    for seed in (SEED, SEED, OTHER_SEED):
        played = context.runs.simulate(
            {
                "population_id": population,
                "name": f"validate reproducibility seed {seed}",
                "rounds": 500,
                "seed": seed,
                "plugin": {"name": "voter", "params": {"initial_share": 0.5}},
            }
        )
        export = context.runs.export_csv(played.simulation_id)
        digests.append(hashlib.sha256(export).hexdigest())
        sizes.append(len(export))
        ids.append(played.simulation_id)
    same = digests[0] == digests[1]
    differs = digests[0] != digests[2]
    context.say(
        f"  reproducibility: same seed {'identical' if same else 'DIFFERENT'}, "
        f"other seed {'different' if differs else 'IDENTICAL'}"
    )
    return [
        CheckResult(
            "reproducibility.same_seed",
            TITLE,
            1.0,
            1.0 if same else 0.0,
            "identical bytes (and another seed's differ)",
            PASS if same and differs else FAIL,
            reason=""
            if same and differs
            else ("the two exports differ" if not same else "another seed gave the same export"),
            how="Two runs of the voter model on cliques with the same seed on the same "
            "population, and one with another seed; GET /api/simulations/{id}/decisions?"
            "format=csv of each, compared by SHA-256. Measured: 1 when the same seed's bytes "
            "are identical.",
            sizes={"agents": agents, "clique": 10},
            details={"sha256": digests, "bytes": sizes, "simulation_ids": ids},
            seconds=time.monotonic() - started,
        )
    ]
