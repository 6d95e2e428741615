"""Launching a simulation from a validated config: the one path the API's launch, a re-run and a
sweep's runs all take, so each is refused for the same reasons with the same words."""

from __future__ import annotations

import secrets
from typing import Any

from backend.db.models import Simulation
from backend.errors import Conflict, InvalidFields
from backend.lifecycles import population as population_lifecycle
from backend.populations import store as population_store
from backend.runtime import Runtime
from backend.simulations import store
from backend.simulations.carried import keeps_changes_only
from backend.simulations.config import (
    SimulationConfig,
    check_against_population,
    check_categories,
)
from backend.simulations.llm_access import llm_access_problems
from backend.simulations.mixture import assignment_record
from backend.simulations.network import is_complete
from backend.simulations.plugin_hosts import plugin_refusal
from backend.simulations.runner import publish_simulation
from backend.simulations.service import start_run
from backend.simulations.spec import models_in_use
from populace.plugin import raise_invalid
from populace.registry import Plugin, installed
from worker_server.version import populace_version


class LaunchRefused(Conflict):
    """The launch cannot happen now; the message says why and what to do."""


def _plugin_of(config: SimulationConfig) -> Plugin:
    """The run's plugin, as installed here (the config's validation found it already)."""
    try:
        return installed().get(config.plugin.name)
    except KeyError as exc:
        raise LaunchRefused(exc.args[0]) from None


def _network_refusal(config: SimulationConfig, population) -> str | None:
    """Why a network simulation cannot play this population: it needs a graph with edges, or a
    complete graph when the plugin plays one under these params (Simulation.plays_complete_graph)."""
    simulation = _plugin_of(config).simulation
    if not simulation.network:
        return None
    graph = (population.config or {}).get("graph")
    if is_complete(population):
        try:
            if simulation.plays_complete_graph(config.params):
                return None
        except Exception as exc:  # the plugin's code
            return (
                f"plugin {config.plugin.name!r} could not say whether it plays a complete graph: "
                f"{type(exc).__name__}: {exc}"
            )
    if not graph or graph.get("kind") == "complete":
        what = "no graph" if not graph else "a complete graph (no edges are stored)"
        return (
            f"population {population.id} has {what}: {config.plugin.name!r} is a network simulation, "
            "which needs a population deployed with a graph of edges (graph: {kind: "
            "erdos_renyi | watts_strogatz | barabasi_albert | cliques | edge_list}; a complete "
            "graph only for a plugin that pairs agents over it, e.g. bounded_confidence with "
            "model: deffuant)"
        )
    return None


def _check_params_against_size(config: SimulationConfig, size: int) -> None:
    """The plugin's own checks of its params against the population's size (ValidationError
    naming plugin.params.<field>)."""
    plugin = _plugin_of(config)
    try:
        problems = plugin.simulation.check_population(config.params, size)
    except Exception as exc:  # the plugin's code
        raise LaunchRefused(
            f"plugin {plugin.name!r} could not check its params against the population: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    raise_invalid(
        "simulation", [(("plugin", "params", *loc), msg, value) for loc, msg, value in problems]
    )


def _attributes(population) -> set[str]:
    return {d["name"] for d in (population.config or {}).get("distributions", [])}


async def _playable_population(session, config: SimulationConfig):
    """The population the config plays, refused (LaunchRefused, ValidationError) unless it
    exists, is deployed (or degraded with allow_partial), and has what the config names."""
    pid = config.population_id
    try:
        population = await population_store.get_population(session, pid)
    except population_store.UnknownPopulation:
        raise LaunchRefused(f"population {pid} does not exist") from None
    if population.status == population_lifecycle.DEGRADED and not config.allow_partial:
        raise LaunchRefused(
            f"population {pid} is degraded: {population.hosted} of {population.size} agents "
            f"are hosted; repair it (POST /api/populations/{pid}/repair) or launch with "
            "allow_partial: true"
        )
    if not population_lifecycle.is_playable(population.status):
        raise LaunchRefused(
            f"population {pid} is {population.status}: only a deployed population can play"
        )
    check_against_population(config, _attributes(population))
    refusal = _network_refusal(config, population)
    if refusal is not None:
        raise LaunchRefused(refusal)
    _check_params_against_size(config, population.size)
    check_categories(config, population.counts or {})
    return population


def _run_record(config: SimulationConfig, population, plugin, seed: int, extra) -> dict:
    """What the run record keeps from the launch (KeepRecord adds the rest at round 1): what
    played it, and who plays which policy with each part's agent count."""
    return {
        **(extra or {}),
        "plugin": {"name": plugin.name, "version": plugin.version},
        "policies": assignment_record(config, seed, population.size, population.counts or {}),
    }


async def launch(
    runtime: Runtime,
    config: SimulationConfig,
    *,
    sweep_id: int | None = None,
    sweep_params: dict[str, Any] | None = None,
    record: dict[str, Any] | None = None,
) -> Simulation:
    """Check the population and the LLM endpoints, store a pending simulation and start it.

    Raises LaunchRefused (409), ValidationError (a config that does not fit the population)
    or InvalidFields (endpoints the workers would not call); nothing is stored then.
    """
    pid = config.population_id
    async with runtime.sessionmaker() as session:
        population = await _playable_population(session, config)
        active = await store.active_simulation(session, pid)
        if active is not None:
            raise LaunchRefused(
                f"population {pid} is busy: simulation {active.id} is {active.status}"
            )
        plugin = _plugin_of(config)
        played = [part.policy.kind for part in config.policy_parts]
        refusal = await plugin_refusal(session, pid, plugin, played)
        if refusal is not None:
            raise LaunchRefused(refusal)
    # The workers hosting the population must be willing to call the endpoints (allowed hosts,
    # API key variables set): refused here rather than failing before round 1.
    problems = await llm_access_problems(runtime.sessionmaker, config)
    if problems:
        raise InvalidFields(problems)
    seed = config.seed if config.seed is not None else secrets.randbits(63)
    async with runtime.sessionmaker() as session:
        try:
            simulation = await store.create_simulation(
                session,
                population_id=pid,
                name=config.name or f"{config.policy.kind}, {config.rounds} rounds",
                rounds=config.rounds,
                config={**config.stored(), "seed": seed},
                seed=seed,
                models=models_in_use(config),
                version=populace_version(),
                record=_run_record(config, population, plugin, seed, record),
                sweep_id=sweep_id,
                sweep_params=sweep_params,
                stores_changes=keeps_changes_only(
                    plugin.simulation.network, config.store_responses
                ),
            )
        except store.PopulationBusy:
            raise LaunchRefused(f"population {pid} is busy with another simulation") from None
    publish_simulation(runtime.hub, simulation)
    await start_run(runtime, simulation, config, resume=False)
    return simulation
