"""Populations: deploy (202 + progress events), browse, repair, delete (clean-up verified)."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Depends, Request, status
from pydantic import BaseModel, Field, ValidationError

from backend.api import uploads
from backend.api.bodies import invalid_body, read_config
from backend.api.errors import error_responses, invalid_input
from backend.api.openapi import config_body
from backend.api.params import AfterId, Limit, PopulationId
from backend.auth import require_api_token
from backend.deps import HubDep, SessionDep, SettingsDep, runtime_of
from backend.populations import graph as population_graph
from backend.populations import store
from backend.populations.cleanup import begin_delete, delete_population, remove_stray_graphs
from backend.populations.config import PopulationConfig, check_submission, parse_config
from backend.populations.deploy import Deployment, check_graph_room, plan_placement
from backend.populations.schemas import PopulationDetail, PopulationOut, PopulationPage

routes = APIRouter(
    prefix="/api/populations",
    tags=["populations"],
    dependencies=[Depends(require_api_token)],
    responses=error_responses(401, 403),
)


def _spawn(request: Request, coroutine) -> None:
    # Kept so the task is not garbage-collected, and cancelled at shutdown.
    runtime_of(request).spawn(coroutine)


@routes.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=PopulationOut,
    openapi_extra=config_body(PopulationConfig),
    responses=error_responses(403, 409, 413, 422),
)
async def create_population(
    request: Request, session: SessionDep, hub: HubDep, settings: SettingsDep
):
    """Deploy a population: the config as JSON, or YAML with Content-Type application/yaml."""
    config = await read_config(request, parse_config)
    try:
        check_submission(config, settings.max_population_size)
    except ValidationError as exc:
        raise invalid_body(exc) from None
    await check_edge_list(config, settings.data_dir)
    if config.graph is not None:
        await remove_stray_graphs(runtime_of(request).sessionmaker, settings.data_dir)
    # The room the deploy will find, checked before anything is stored (NotEnoughCapacity,
    # NotEnoughProcesses, GraphTooLarge: 409).
    check_graph_room(config, await plan_placement(session, config))
    population = await store.create_population(
        session, config.name, config.size, config.seed, config.model_dump(mode="json")
    )
    await session.commit()
    deployment = Deployment(
        runtime_of(request).sessionmaker, hub, population.id, config, settings.data_dir
    )
    _spawn(request, deployment.run())
    return population


async def check_edge_list(config: PopulationConfig, data_dir) -> None:
    """An uploaded edge list is parsed now (in a thread), so an unknown id, a self-loop or a
    duplicate is a 422 with its counts and lines before anything is stored or deployed."""
    if config.graph is None or config.graph.kind != "edge_list":
        return
    try:
        await asyncio.to_thread(population_graph.build, config, data_dir)
    except population_graph.GraphInvalid as exc:
        raise invalid_input(("body", *exc.loc), exc.message, "graph_config") from None


class PopulationValidated(BaseModel):
    config: dict[str, Any] = Field(
        description="the config as POST /api/populations would store it (defaults filled in, "
        "URLs normalised)"
    )
    attributes: list[str] = Field(description="the attributes each agent would get")


@routes.post(
    "/validate",
    response_model=PopulationValidated,
    openapi_extra=config_body(PopulationConfig),
    responses=error_responses(403, 413, 422),
)
async def validate_population(request: Request, settings: SettingsDep):
    """Check a population config as a deploy would (JSON, or YAML with Content-Type
    application/yaml) without deploying it; whether the cluster has room is checked only when
    it is deployed."""
    config = await read_config(request, parse_config)
    try:
        check_submission(config, settings.max_population_size)
    except ValidationError as exc:
        raise invalid_body(exc) from None
    await check_edge_list(config, settings.data_dir)
    attributes = [name for dist in config.distributions for name in dist.placeholders]
    return PopulationValidated(config=config.model_dump(mode="json"), attributes=attributes)


@routes.get("", response_model=PopulationPage)
async def list_populations(
    session: SessionDep,
    after: AfterId = None,
    limit: Limit = 100,
    include_deleted: bool = False,
):
    rows, next_after = await store.list_populations(
        session, after=after, limit=limit, include_deleted=include_deleted
    )
    return PopulationPage(
        items=[PopulationOut.model_validate(p) for p in rows], next_after=next_after
    )


@routes.get("/{population_id}", response_model=PopulationDetail, responses=error_responses(404))
async def get_population(population_id: PopulationId, session: SessionDep):
    population = await store.get_population(session, population_id)
    per_worker = await store.agents_per_worker(session, population_id)
    return PopulationDetail.model_validate(
        {
            **PopulationOut.model_validate(population).model_dump(),
            "config": population.config,
            # Agents placed on no worker (degraded, no room) are counted under "null".
            "agents_per_worker": {
                ("null" if k is None else str(k)): v for k, v in per_worker.items()
            },
        }
    )


@routes.post(
    "/{population_id}/repair",
    response_model=PopulationOut,
    responses=error_responses(403, 404, 409),
)
async def repair_population(population_id: PopulationId, request: Request, session: SessionDep):
    """Host every agent again now: restore what live workers lost, and re-place the agents of
    offline or removed workers (without waiting for the grace period) onto online workers with
    room. Answers with the population as it is afterwards (degraded when room ran out)."""
    store.require_playable(
        await store.get_population(session, population_id),
        "only a deployed or degraded population can be repaired",
    )
    await runtime_of(request).keeper.repair(population_id, replace_offline=True)
    return await store.get_population(session, population_id)


@routes.delete(
    "/{population_id}",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=PopulationOut,
    responses=error_responses(403, 404, 409),
)
async def remove_population(
    population_id: PopulationId, request: Request, session: SessionDep, hub: HubDep
):
    population, started = await begin_delete(session, population_id)
    if started:
        _spawn(request, delete_population(runtime_of(request).sessionmaker, hub, population_id))
    return population


# The app serves this module's `router`: the population routes, and the uploads their graphs
# name (backend.api.uploads). Each route already carries its router's prefix, token check and
# error responses, so the routes themselves are listed (the app and the schema walk see them).
router = APIRouter()
router.routes.extend([*routes.routes, *uploads.router.routes])
