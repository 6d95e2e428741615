"""Starting a simulation run, fresh or resumed, from what the store holds.

The API (launch, resume) and the start-up reconciliation start runs the same way: the stored,
validated config becomes the game spec, the kept rounds become the history, and the run goes
into the process's table of runs. API keys are never stored (the config holds "***"): they are
kept in this process's memory from launch, or given again when a run is resumed after a
manager restart.
"""

from __future__ import annotations

from typing import Any

from starlette.datastructures import State

from backend.db.models import Simulation
from backend.populations import store as population_store
from backend.settings import ManagerSettings
from backend.simulations.config import REDACTED, SimulationConfig
from backend.simulations.environment import FaultPolicy
from backend.simulations.runner import SimulationRun, resume_point
from backend.simulations.spec import game_spec


class MissingApiKey(Exception):
    """A resumed LLM run needs an endpoint's API key, which is not stored."""

    def __init__(self, base_url: str) -> None:
        super().__init__(
            f"the API key of LLM endpoint {base_url} is not stored (keys never are) and this "
            'manager process does not hold it: resume with {"api_keys": {"<base_url>": '
            '"<key>"}}'
        )
        self.base_url = base_url


def fault_policy(settings: ManagerSettings) -> FaultPolicy:
    return FaultPolicy(
        recovery_s=settings.round_recovery_s,
        llm_failure_ratio=settings.llm_failure_ratio,
        llm_failure_min_requests=settings.llm_failure_min_requests,
    )


def remember_api_keys(state: State, simulation_id: int, config: SimulationConfig) -> None:
    policy = config.policy
    keys = {e.base_url: e.api_key for e in getattr(policy, "endpoints", []) or [] if e.api_key}
    if keys:
        state.simulation_keys[simulation_id] = keys


def _config_with_keys(simulation: Simulation, keys: dict[str, str]) -> SimulationConfig:
    data: dict[str, Any] = dict(simulation.config)
    policy = data.get("policy", {})
    if policy.get("kind") == "llm":
        endpoints = []
        for endpoint in policy.get("endpoints", []):
            endpoint = dict(endpoint)
            if endpoint.get("api_key") == REDACTED:
                key = keys.get(endpoint["base_url"])
                if key is None:
                    raise MissingApiKey(endpoint["base_url"])
                endpoint["api_key"] = key
            endpoints.append(endpoint)
        data["policy"] = {**policy, "endpoints": endpoints}
    return SimulationConfig.model_validate(data)


def check_resumable(
    state: State, simulation: Simulation, api_keys: dict[str, str] | None = None
) -> SimulationConfig:
    """The run's config with its API keys, or MissingApiKey (nothing changes)."""
    keys = {**state.simulation_keys.get(simulation.id, {}), **(api_keys or {})}
    return _config_with_keys(simulation, keys)


async def start_run(
    state: State,
    simulation: Simulation,
    config: SimulationConfig,
    *,
    resume: bool,
    api_keys: dict[str, str] | None = None,
) -> SimulationRun:
    """Start (or resume, after its last kept round) a run in this process."""
    if api_keys:
        state.simulation_keys.setdefault(simulation.id, {}).update(api_keys)
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
