"""The same seed gives a byte-identical export, and so does a run disturbed by a worker SIGKILL.

A voter run on a small world (values travel worker to worker along its edges) is played twice
with one seed, and once with another seed (which must differ, or the comparison proves
nothing). Then, on a local cluster, the same seed is played once more while validate SIGKILLs
one of the worker processes it started, mid-run: the manager re-places that worker's agents and
plays the interrupted round again, and the export must be the same bytes as the undisturbed
run's. The CSV exports are compared by SHA-256."""

from __future__ import annotations

import hashlib
import time

from backend.validate.context import Context
from backend.validate.result import FAIL, PASS, CheckResult, not_run
from backend.validate.runs import TERMINAL

SEED, OTHER_SEED = 21, 22
# Connected, and far from consensus after ROUNDS rounds: every run plays all of them, so the
# kill lands while the disturbed run is still playing.
GRAPH = {"kind": "watts_strogatz", "k": 6, "p": 0.2}
ROUNDS = 60
KILL_AFTER_ROUND = 2
TITLE = "Reproducibility: the same seed gives a byte-identical export"
KILLED_TITLE = "Reproducibility: a run disturbed by a worker SIGKILL exports the same bytes"
POLL_S = 0.05


def run(context: Context) -> list[CheckResult]:
    if "voter" not in context.plugins:
        reason = "the plugin voter is not installed"
        return [not_run("reproducibility.same_seed", TITLE, reason), _killed_not_run(reason)]
    started = time.monotonic()
    agents = context.sizes.repro_agents
    if context.spare is not None:
        context.spare.start()  # before the deploy, so the spare hosts some of the agents
    population = context.population("reproducibility", agents, GRAPH)
    digests, sizes, ids = [], [], []
    for seed in (SEED, SEED, OTHER_SEED):
        played = context.runs.simulate(_config(population, seed))
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
    same_seed = CheckResult(
        "reproducibility.same_seed",
        TITLE,
        1.0,
        1.0 if same else 0.0,
        "identical bytes (and another seed's differ)",
        PASS if same and differs else FAIL,
        reason=""
        if same and differs
        else ("the two exports differ" if not same else "another seed gave the same export"),
        how=f"Two runs of the voter model on a Watts–Strogatz graph (k 6, p 0.2, {ROUNDS} "
        "rounds) with the same seed on the same population, and one with another seed; "
        "GET /api/simulations/{id}/decisions?format=csv of each, compared by SHA-256. "
        "Measured: 1 when the same seed's bytes are identical.",
        sizes={"agents": agents, "rounds": ROUNDS, "graph": GRAPH},
        details={"sha256": digests, "bytes": sizes, "simulation_ids": ids},
        seconds=time.monotonic() - started,
    )
    return [same_seed, _killed(context, population, digests[0])]


def _config(population: int, seed: int) -> dict:
    return {
        "population_id": population,
        "name": f"validate reproducibility seed {seed}",
        "rounds": ROUNDS,
        "seed": seed,
        "plugin": {"name": "voter", "params": {"initial_share": 0.5}},
    }


def _killed_not_run(reason: str) -> CheckResult:
    return not_run("reproducibility.worker_killed", KILLED_TITLE, reason)


def _killed(context: Context, population: int, undisturbed: str) -> CheckResult:
    """The seed played again while a worker is SIGKILLed after round KILL_AFTER_ROUND."""
    if context.spare is None:
        return _killed_not_run(
            "validate kills only workers it started itself: leave out --manager for this check"
        )
    started = time.monotonic()
    client = context.runs.client
    simulation_id = context.runs.start(_config(population, SEED))
    while (simulation := client.simulation(simulation_id)).current_round <= KILL_AFTER_ROUND:
        if simulation.status in TERMINAL:
            break
        time.sleep(POLL_S)
    if simulation.status in TERMINAL:
        return _killed_not_run(f"the run was {simulation.status} before the kill could land")
    context.spare.kill()
    killed_at = simulation.current_round
    played = context.runs.wait(simulation_id, started)
    faults = [e.message for e in client.timeline(simulation_id) if e.kind == "fault"]
    export = context.runs.export_csv(simulation_id)
    digest = hashlib.sha256(export).hexdigest()
    lost = client.simulation(simulation_id).lost_agents
    same, noticed = digest == undisturbed, bool(faults)
    context.say(
        f"  reproducibility: worker SIGKILLed during round {killed_at}, "
        f"{len(faults)} fault(s) on the timeline, export "
        f"{'identical' if same else 'DIFFERENT'}"
    )
    if not noticed:
        reason = "the run shows no fault on its timeline: the kill did not disturb it"
    elif lost:
        reason = f"{lost} agents were lost"
    elif not same:
        reason = "the disturbed run's export differs from the undisturbed run's"
    else:
        reason = ""
    return CheckResult(
        "reproducibility.worker_killed",
        KILLED_TITLE,
        1.0,
        1.0 if same else 0.0,
        "identical bytes, the fault on the run's timeline, no agent lost",
        FAIL if reason else PASS,
        reason=reason,
        how=f"The same seed played again on the same population while validate SIGKILLs the "
        f"process group of one of the three worker processes it started (a node lost), once "
        f"round {KILL_AFTER_ROUND} is kept; the manager re-places its agents and plays the "
        "interrupted round again. Its CSV export is compared by SHA-256 with the undisturbed "
        "run's. Measured: 1 when the bytes are identical.",
        sizes={"agents": context.sizes.repro_agents, "rounds": ROUNDS, "graph": GRAPH},
        details={
            "killed_during_round": killed_at,
            "faults": faults,
            "lost_agents": lost,
            "rounds": len(played.rounds),
            "sha256": digest,
            "simulation_id": simulation_id,
        },
        seconds=time.monotonic() - started,
    )
