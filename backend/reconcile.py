"""Start-up reconciliation: every state a stopped manager left behind is finished or undone.

A manager can stop at any moment (SIGTERM, SIGKILL, a lost machine). When it starts again:

- live workers get a fresh TTL, and the liveness sweep spares them for a grace period (their
  retries back off), so none is called offline for the time the manager itself was down;
- a deploy in flight is undone: its agents leave the workers and the store, and the population
  is `failed` with the reason (a deploy cannot be resumed half-way: placement and personas
  would have to be redone anyway);
- a delete in flight is finished;
- every simulation that was pending or running resumes from its last committed round, by
  itself; its first round waits for the workers to be back (and re-places agents whose worker
  does not come back), and its timeline says "manager restarted, resumed from round N". A
  paused run stays paused. A run that cannot resume (its population is
  gone, its stored config no longer validates) is paused with the reason, never left `running`;
- every running sweep is driven again (backend.sweeps.runner): it launches only the points that
  have no run yet.
"""

from __future__ import annotations

import logging

from backend.db.times import utcnow
from backend.events.catalog import SimulationRestarted
from backend.lifecycles import population as population_lifecycle
from backend.lifecycles import simulation as simulation_lifecycle
from backend.populations import store as population_store
from backend.populations.cleanup import delete_population, remove_stray_graphs
from backend.runtime import Runtime
from backend.simulations import store as simulation_store
from backend.simulations import timeline
from backend.simulations.runner import publish_simulation
from backend.simulations.service import check_resumable, start_run
from backend.sweeps.runner import resume_sweeps

log = logging.getLogger(__name__)

DEPLOY_UNDONE = "the manager stopped during the deploy; it was undone at start-up"


async def reconcile_at_startup(runtime: Runtime) -> dict[str, list[int]]:
    """Returns what it did, by kind: {"deploys_undone": [...], "deletes_finished": [...],
    "simulations_resumed": [...], "simulations_paused": [...], "sweeps_resumed": [...], "graphs_removed": [...]}."""
    sessionmaker, hub = runtime.sessionmaker, runtime.hub
    done: dict[str, list[int]] = {
        "deploys_undone": [],
        "deletes_finished": [],
        "simulations_resumed": [],
        "simulations_paused": [],
    }
    async with sessionmaker() as session:
        await runtime.liveness.load(session)
        unfinished = list(
            (await population_store.statuses(session, population_lifecycle.IN_FLIGHT)).items()
        )
        simulations = [
            s
            for s in await simulation_store.active_simulations(session)
            if s.status in simulation_lifecycle.PLAYING
        ]
    for population_id, status in unfinished:
        if status == population_lifecycle.DEPLOYING:
            done["deploys_undone"].append(population_id)
            runtime.spawn(
                delete_population(
                    sessionmaker,
                    hub,
                    population_id,
                    final_status=population_lifecycle.FAILED,
                    error=DEPLOY_UNDONE,
                ),
            )
        else:
            done["deletes_finished"].append(population_id)
            runtime.spawn(delete_population(sessionmaker, hub, population_id))

    for simulation in simulations:
        try:
            config = check_resumable(simulation)
            run = await start_run(runtime, simulation, config, resume=True)
        except Exception as exc:  # NotResumable, a population gone: paused, with the reason
            reason = f"could not resume at manager start-up: {exc}"
            log.warning("simulation %s %s", simulation.id, reason)
            async with sessionmaker() as session:
                paused = await simulation_store.set_status(
                    session, simulation.id, simulation_lifecycle.PAUSED, pause_reason=reason
                )
            if paused is not None:
                publish_simulation(hub, paused)
            done["simulations_paused"].append(simulation.id)
            continue
        # Its status stays `running`: its timeline says it was resumed (written before the
        # run's next round is kept: that round is played first).
        async with sessionmaker() as session:
            entry = timeline.restart_entry(simulation.id, run.resume.played, utcnow())
            timeline.add_entries(session, [entry])
            await session.commit()
        hub.publish(SimulationRestarted(simulation_id=simulation.id, round=run.resume.played))
        done["simulations_resumed"].append(simulation.id)
    # After the runs: a sweep's driver finds its runs (resumed above) by sweep_id.
    done["sweeps_resumed"] = await resume_sweeps(runtime)
    # A manager stopped between writing a population's graph file and recording it left one.
    done["graphs_removed"] = await remove_stray_graphs(sessionmaker, runtime.settings.data_dir)
    if any(done.values()):
        log.info("start-up reconciliation: %s", done)
    return done
