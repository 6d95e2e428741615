"""Starting a simulation run, fresh or resumed, from what the store holds.

The API (launch, resume) and the start-up reconciliation start runs the same way: the stored,
validated config becomes the game spec, the kept rounds become the history, and the run goes
into the process's table of runs. A config holds no API key, only the name of the variable
that holds it on the workers (api_key_env), so any manager process can resume any run.
"""

from __future__ import annotations

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import Simulation
from backend.errors import Conflict
from backend.lifecycles import simulation as lifecycle
from backend.populations import store as population_store
from backend.runtime import Runtime
from backend.settings import ManagerSettings
from backend.simulations import store
from backend.simulations.config import SimulationConfig
from backend.simulations.environment import FaultPolicy
from backend.simulations.network import is_complete
from backend.simulations.outcome import PluginFailed
from backend.simulations.runner import (
    ResumePoint,
    SimulationRun,
    publish_simulation,
    resume_point,
)
from backend.simulations.spec import GameSpec, game_spec


class NotResumable(Conflict):
    """The stored config no longer validates (e.g. an API key from before api_key_env)."""


class WrongStatus(Conflict):
    """The run's status does not allow the action (cancel a finished run, pause a paused one,
    resume a running one, or one that changed meanwhile)."""


def fault_policy(settings: ManagerSettings) -> FaultPolicy:
    return FaultPolicy(
        recovery_s=settings.round_recovery_s,
        llm_failure_ratio=settings.llm_failure_ratio,
        llm_failure_min_requests=settings.llm_failure_min_requests,
    )


def check_resumable(simulation: Simulation) -> SimulationConfig:
    """The run's stored config, validated again, or NotResumable saying why (nothing changes)."""
    try:
        return SimulationConfig.model_validate(simulation.config)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False)
        )
        raise NotResumable(
            f"simulation {simulation.id}'s stored config is no longer valid ({problems}); "
            "launch it again with a corrected config"
        ) from None


async def read_back(session: AsyncSession, simulation_id: int, spec: GameSpec) -> ResumePoint:
    """The run's kept rounds as its plugin reads them back, or NotResumable saying why."""
    try:
        return await resume_point(session, simulation_id, spec)
    except (PluginFailed, ValueError) as exc:
        raise NotResumable(
            f"simulation {simulation_id}'s kept rounds cannot be read back by its plugin "
            f"({exc}); launch it again"
        ) from None


async def start_run(
    runtime: Runtime,
    simulation: Simulation,
    config: SimulationConfig,
    *,
    resume: bool,
) -> SimulationRun:
    """Start (or resume, after its last kept round) a run in this process."""
    async with runtime.sessionmaker() as session:
        population = await population_store.get_population(session, simulation.population_id)
        spec = game_spec(
            config,
            simulation.id,
            simulation.seed,
            population.size,
            stores_changes=simulation.stores_changes,
        )
        point = await read_back(session, simulation.id, spec) if resume else None
    run = SimulationRun(
        sessionmaker=runtime.sessionmaker,
        hub=runtime.hub,
        spec=spec,
        population_size=population.size,
        keeper=runtime.keeper,
        faults=fault_policy(runtime.settings),
        store_retry_s=runtime.settings.round_store_retry_s,
        data_dir=runtime.settings.data_dir,
        complete_graph=is_complete(population),
    )
    if point is not None:
        run.resume = point
    runtime.simulations.start(run, runtime.background)
    return run


async def cancel(
    runtime: Runtime, session: AsyncSession, simulation_id: int, reason: str | None
) -> Simulation:
    """Stop a run for good (after dropping the round in flight), noting why when given."""
    simulation = await store.get_simulation(session, simulation_id)
    if lifecycle.is_final(simulation.status):
        raise WrongStatus(f"simulation {simulation_id} is already {simulation.status}")
    if reason:
        await store.set_cancel_reason(session, simulation_id, reason)
    if not await runtime.simulations.cancel(simulation_id):
        # Active in the store but not running in this process (paused): nothing to stop.
        cancelled = await store.set_status(session, simulation_id, lifecycle.CANCELLED)
        if cancelled is not None:
            publish_simulation(runtime.hub, cancelled)
    return await store.get_simulation(session, simulation_id)


async def pause(runtime: Runtime, session: AsyncSession, simulation_id: int) -> Simulation:
    """Stop after dropping the round in flight; resume goes on from the last kept round."""
    simulation = await store.get_simulation(session, simulation_id)
    if simulation.status not in lifecycle.PLAYING:
        raise WrongStatus(
            f"simulation {simulation_id} is {simulation.status}: only a running one pauses"
        )
    reason = "paused by an operator"
    if not await runtime.simulations.pause(simulation_id, reason):
        paused = await store.set_status(
            session, simulation_id, lifecycle.PAUSED, pause_reason=reason
        )
        if paused is not None:
            publish_simulation(runtime.hub, paused)
    return await store.get_simulation(session, simulation_id)


async def resume(
    runtime: Runtime, session: AsyncSession, simulation_id: int, allow_partial: bool | None
) -> Simulation:
    """A paused or failed run goes on from the round after its last kept one, with its
    allow_partial changed when given."""
    simulation = await store.get_simulation(session, simulation_id)
    if simulation.status not in lifecycle.RESUMABLE:
        raise WrongStatus(
            f"simulation {simulation_id} is {simulation.status}: only a paused or failed one "
            "resumes"
        )
    if runtime.simulations.get(simulation_id) is not None:
        raise WrongStatus(f"simulation {simulation_id} is still stopping; try again")
    population = population_store.require_playable(
        await population_store.get_population(session, simulation.population_id),
        f"simulation {simulation_id} cannot resume",
    )
    config = check_resumable(simulation)
    changed = None
    if allow_partial is not None:
        config = config.model_copy(update={"allow_partial": allow_partial})
        changed = {**simulation.config, "allow_partial": allow_partial}
    # Checked before anything changes (start_run reads them again, as the run goes on).
    spec = game_spec(
        config,
        simulation.id,
        simulation.seed,
        population.size,
        stores_changes=simulation.stores_changes,
    )
    await read_back(session, simulation_id, spec)
    try:
        resumed = await store.reactivate(session, simulation_id, config=changed)
    except store.PopulationBusy:
        raise WrongStatus(f"population {population.id} is busy with another simulation") from None
    if resumed is None:
        raise WrongStatus(f"simulation {simulation_id} changed meanwhile; try again")
    await start_run(runtime, resumed, config, resume=True)
    return resumed
