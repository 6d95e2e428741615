"""Starting a simulation run, fresh or resumed, from what the store holds.

The API (launch, resume) and the start-up reconciliation start runs the same way: the stored,
validated config becomes the game spec, the kept rounds become the history, and the run goes
into the process's table of runs. A config holds no API key, only the name of the variable
that holds it on the workers (api_key_env), so any manager process can resume any run.
"""

from __future__ import annotations

from pydantic import ValidationError
from starlette.datastructures import State

from backend.db.models import Simulation
from backend.errors import Conflict
from backend.populations import store as population_store
from backend.settings import ManagerSettings
from backend.simulations.config import SimulationConfig
from backend.simulations.environment import FaultPolicy
from backend.simulations.runner import SimulationRun, resume_point
from backend.simulations.spec import game_spec


class NotResumable(Conflict):
    """The stored config no longer validates (e.g. an API key from before api_key_env)."""


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


async def start_run(
    state: State,
    simulation: Simulation,
    config: SimulationConfig,
    *,
    resume: bool,
) -> SimulationRun:
    """Start (or resume, after its last kept round) a run in this process."""
    async with state.sessionmaker() as session:
        population = await population_store.get_population(session, simulation.population_id)
        point = await resume_point(session, simulation, config.feedback.mean) if resume else None
    run = SimulationRun(
        sessionmaker=state.sessionmaker,
        hub=state.hub,
        spec=game_spec(config, simulation.id, simulation.seed),
        population_size=population.size,
        keeper=state.keeper,
        faults=fault_policy(state.settings),
    )
    if point is not None:
        run.resume = point
    state.simulations.start(run, state.background)
    return run
