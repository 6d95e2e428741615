"""Simulations: launch (202 + live events), follow, pause, resume, cancel, read every result
back, and delete."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request, status
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from backend.api.bodies import CheckedJsonRoute, invalid_body, read_config
from backend.api.errors import error_responses, invalid_input
from backend.api.openapi import config_body
from backend.api.params import (
    AfterAgentId,
    AfterId,
    AfterRound,
    Limit,
    PopulationFilter,
    RoundFilter,
    SimulationId,
    SweepFilter,
    attribute_filter,
)
from backend.auth import require_api_token
from backend.db.models import INT64_MAX
from backend.deps import HubDep, SessionDep, runtime_of
from backend.events.catalog import SimulationDeleted
from backend.lifecycles.decision import DecisionStatus
from backend.lifecycles.simulation import SIMULATION_STATUSES
from backend.populations import store as population_store
from backend.rounds.meters import run_meters, total_cost
from backend.simulations import export, listing, service, store, timeline, transcripts
from backend.simulations.config import (
    SimulationConfig,
    parse_config,
    raise_at,
)
from backend.simulations.estimate import estimate
from backend.simulations.export_values import value_type
from backend.simulations.launch import launch
from backend.simulations.mixture import export_parts
from backend.simulations.schemas import (
    EndpointMeter,
    RoundOut,
    RoundPage,
    SimulationDetail,
    SimulationListItem,
    SimulationOut,
    SimulationPage,
    TimelineEntryOut,
    TimelinePage,
    TranscriptOut,
    TranscriptPage,
)
from backend.simulations.spec import stored_prices
from populace.plugin import NAME

RESUME_KEYS_REFUSED = (
    "the manager takes no API keys: workers read them from their own environment or keys file, "
    "by the name each endpoint's api_key_env gives, so a resume needs none"
)

router = APIRouter(
    prefix="/api/simulations",
    tags=["simulations"],
    dependencies=[Depends(require_api_token)],
    responses=error_responses(401, 403),
    route_class=CheckedJsonRoute,
)


class CancelBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str | None = Field(
        None, max_length=500, description="why, shown with the run (free text)"
    )


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=SimulationOut,
    openapi_extra=config_body(SimulationConfig),
    responses=error_responses(403, 409, 413, 422),
)
async def create_simulation(request: Request):
    """Launch a simulation: the config as JSON, or YAML with Content-Type application/yaml."""
    config = await read_config(request, parse_config)
    try:
        return await launch(runtime_of(request), config)
    except ValidationError as exc:
        raise invalid_body(exc) from None


class EstimateRound(BaseModel):
    round: int
    requests: int
    asks: int = Field(description="prompts sent for agents' own answers")
    reads: int = Field(description="reads of a shared prompt's answer distribution")


class EstimateOut(BaseModel):
    """Counted with the workers' own rules (backend/simulations/estimate.py says how)."""

    agents: int
    llm_agents: int = Field(
        0, description="agents the LLM answers: all, or its part's of a mixed policy (0: none)"
    )
    rounds: int
    llm_mode: str | None = Field(
        description="how agents with identical prompts are answered: per_agent (a request "
        "each), shared (temperature 0: one answer for all) or exchangeable (a few ask, then "
        "the prompt's answer distribution is read once and the others draw from it)"
    )
    requests: int = Field(description="LLM requests over every round (retries not counted)")
    prompt_tokens: int
    completion_tokens: int = Field(description="at most: max_tokens an answer, one a read prefix")
    prompt_tokens_per_request: int = Field(
        description="prompts rendered for a sample of the population's agents, at about four "
        "characters a token, times the prompts a request carries"
    )
    cost_usd: float | None = Field(description="from the endpoints' prices; null without")
    distinct_prompts: int = Field(
        description="different prompts in round 1, counted per worker process (each process "
        "answers its own agents)"
    )
    asks: int = Field(description="prompts sent for agents' own answers, over every round")
    reads: int = Field(description="answer-distribution reads, over every round")
    assumption: str | None = Field(
        description="how a prompt's sampled answers are assumed to spread, which splits agents "
        "who shared a prompt by their own past choices in later rounds (null: no such split)"
    )
    per_round: list[EstimateRound]
    endpoints: list[dict[str, Any]]


@router.post(
    "/estimate",
    response_model=EstimateOut,
    openapi_extra=config_body(SimulationConfig),
    responses=error_responses(404, 413, 422),
)
async def estimate_simulation(request: Request, session: SessionDep):
    """What a config would ask of its LLM endpoints, before launching it (nothing is stored)."""
    return await estimate(session, await read_config(request, parse_config))


def _statuses(status: list[str] | None) -> tuple[str, ...]:
    """`?status=running&status=paused` or `?status=running,paused`; a 422 naming `status`
    for one that is not a run's status."""
    given = [part.strip() for value in status or () for part in value.split(",") if part.strip()]
    unknown = [s for s in given if s not in SIMULATION_STATUSES]
    if unknown:
        raise invalid_input(
            ("query", "status"),
            f"{unknown[0]!r} is not a status: use {', '.join(SIMULATION_STATUSES)}",
            "enum",
        )
    return tuple(dict.fromkeys(given))


@router.get("", response_model=SimulationPage, responses=error_responses(422))
async def list_simulations(
    session: SessionDep,
    q: Annotated[
        str | None,
        Query(max_length=200, description="only runs whose name contains this (any case)"),
    ] = None,
    population_id: PopulationFilter = None,
    status: Annotated[
        list[str] | None,
        Query(
            description="only runs in these statuses: repeat it or separate them with commas "
            f"({', '.join(SIMULATION_STATUSES)})"
        ),
    ] = None,
    plugin: Annotated[
        str | None, Query(pattern=NAME, description="only runs of this plugin (by its name)")
    ] = None,
    sweep_id: SweepFilter = None,
    sort: Annotated[
        Literal[listing.SORTS],  # type: ignore[valid-type]
        Query(description="the column to sort by, `-` first for descending; ties go by id"),
    ] = "id",
    cursor: Annotated[
        str | None,
        Query(max_length=1000, description="next_cursor of the previous page (any sort)"),
    ] = None,
    after: AfterId = None,
    limit: Limit = 100,
):
    """The runs, filtered, sorted and paged: each with its plugin's params, its sweep's name
    and the metrics of its last kept round, for a table of runs with their params and
    results."""
    filters = listing.RunFilters(
        q=q or None,
        population_id=population_id,
        statuses=_statuses(status),
        plugin=plugin,
        sweep_id=sweep_id,
    )
    page = await listing.list_runs(
        session, filters, sort=sort, cursor=cursor, after=after, limit=limit
    )
    return SimulationPage(
        items=[
            SimulationListItem.of(r.simulation, r.sweep_name, r.last_metrics) for r in page.runs
        ],
        next_after=page.next_after,
        next_cursor=page.next_cursor,
    )


@router.get("/{simulation_id}", response_model=SimulationDetail, responses=error_responses(404))
async def get_simulation(simulation_id: SimulationId, session: SessionDep):
    simulation = await store.get_simulation(session, simulation_id)
    detail = SimulationDetail.model_validate(simulation)
    if simulation.models:  # an LLM run: its meters are the sum of its rounds'
        meters = run_meters(
            await store.round_endpoints(session, simulation_id), stored_prices(simulation.config)
        )
        detail.meters = [EndpointMeter.model_validate(m) for m in meters]
        detail.cost_usd = total_cost(meters)
    return detail


@router.post(
    "/{simulation_id}/cancel",
    response_model=SimulationOut,
    responses=error_responses(403, 404, 409),
)
async def cancel_simulation(
    simulation_id: SimulationId,
    request: Request,
    session: SessionDep,
    body: CancelBody | None = None,
):
    """Stop a run for good (after dropping the round in flight), optionally saying why."""
    reason = body.reason if body is not None else None
    return await service.cancel(runtime_of(request), session, simulation_id, reason)


@router.post(
    "/{simulation_id}/rerun",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=SimulationOut,
    responses=error_responses(403, 404, 409, 422),
)
async def rerun_simulation(simulation_id: SimulationId, request: Request, session: SessionDep):
    """Launch the same run again: same population, config and seed (its record says which run
    it repeats). Agent randomness is keyed by (seed, round, agent), so a run without an LLM
    (or with an LLM at temperature 0 on the same model) exports the same decisions."""
    simulation = await store.get_simulation(session, simulation_id)
    config = service.check_resumable(simulation).model_copy(update={"seed": simulation.seed})
    try:
        return await launch(runtime_of(request), config, record={"rerun_of": simulation_id})
    except ValidationError as exc:
        raise invalid_body(exc) from None


@router.delete(
    "/{simulation_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=error_responses(403, 404, 409),
)
async def delete_simulation(simulation_id: SimulationId, session: SessionDep, hub: HubDep):
    """A finished (completed, failed or cancelled) simulation, its rounds and every decision.
    A pending, running or paused one is 409: cancel it first."""
    await store.delete_simulation(session, simulation_id)
    hub.publish(SimulationDeleted(simulation_id=simulation_id))


@router.post(
    "/{simulation_id}/pause",
    response_model=SimulationOut,
    responses=error_responses(403, 404, 409),
)
async def pause_simulation(simulation_id: SimulationId, request: Request, session: SessionDep):
    """Stop after dropping the round in flight; resume goes on from the last kept round."""
    return await service.pause(runtime_of(request), session, simulation_id)


class ResumeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    allow_partial: bool | None = Field(
        None,
        description="change the run's allow_partial from here on (e.g. to go on without agents "
        "that cannot be hosted again)",
    )

    @model_validator(mode="before")
    @classmethod
    def _no_api_keys(cls, data):
        if isinstance(data, dict) and "api_keys" in data:
            # input=None: never echo keys back.
            raise_at("ResumeBody", [(("api_keys",), RESUME_KEYS_REFUSED, None)])
        return data


@router.post(
    "/{simulation_id}/resume",
    response_model=SimulationOut,
    responses=error_responses(403, 404, 409, 413),
)
async def resume_simulation(
    simulation_id: SimulationId,
    request: Request,
    session: SessionDep,
    body: ResumeBody | None = None,
):
    """A paused or failed run goes on from the round after its last kept one."""
    allow_partial = body.allow_partial if body is not None else None
    return await service.resume(runtime_of(request), session, simulation_id, allow_partial)


@router.get(
    "/{simulation_id}/transcripts", response_model=TranscriptPage, responses=error_responses(404)
)
async def list_transcripts(
    simulation_id: SimulationId,
    session: SessionDep,
    round: RoundFilter = None,
    status: Annotated[DecisionStatus | None, Query(description="only these")] = None,
    attribute: Annotated[
        str | None, Query(max_length=400, description="name:value, e.g. education:doctorate")
    ] = None,
    min: Annotated[float | None, Query(description="values at least this")] = None,
    max: Annotated[float | None, Query(description="values at most this")] = None,
    after: AfterAgentId = None,
    limit: Annotated[int, Query(ge=1, le=200, description="items per page")] = 50,
):
    """A sample browser over one round (the last kept one by default): per agent, the prompt
    its worker sent (rebuilt, see backend.simulations.transcripts), the raw answer when the run
    stored answers, the value, and why an answer was invalid, late or lost."""
    simulation = await store.get_simulation(session, simulation_id)
    chosen = round if round is not None else simulation.current_round
    rows, next_after = await transcripts.round_transcripts(
        session,
        simulation,
        chosen,
        status=status,
        attribute=attribute_filter(attribute),
        value_min=min,
        value_max=max,
        after=after,
        limit=limit,
    )
    return TranscriptPage(
        items=[TranscriptOut.model_validate(vars(r)) for r in rows], next_after=next_after
    )


@router.get(
    "/{simulation_id}/timeline", response_model=TimelinePage, responses=error_responses(404)
)
async def get_timeline(
    simulation_id: SimulationId,
    session: SessionDep,
    after: Annotated[
        int | None,
        Query(ge=0, le=INT64_MAX, description="id of the last entry of the previous page"),
    ] = None,
    limit: Limit = 200,
):
    """What happened to the run, oldest first: launched, started, each round (mean, duration),
    faults, pauses, resumes, and how it ended (with the reason or error). Live: follow
    `timeline.added` on the run's topic, or ask again after the last id."""
    await store.get_simulation(session, simulation_id)
    entries, next_after = await timeline.list_entries(
        session, simulation_id, after=after, limit=limit
    )
    return TimelinePage(
        items=[TimelineEntryOut.model_validate(e.view()) for e in entries], next_after=next_after
    )


@router.get("/{simulation_id}/rounds", response_model=RoundPage, responses=error_responses(404))
async def list_rounds(
    simulation_id: SimulationId,
    session: SessionDep,
    after: AfterRound = None,
    limit: Limit = 1000,
):
    await store.get_simulation(session, simulation_id)
    rows, next_after = await store.list_rounds(session, simulation_id, after=after, limit=limit)
    return RoundPage(items=[RoundOut.model_validate(r) for r in rows], next_after=next_after)


@router.get(
    "/{simulation_id}/decisions",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "Every decision, streamed (a round's when `round` is given); "
            "a mixed run's have a last `policy` column: the label of the part each agent played",
            "content": {
                media.split(";")[0]: {"schema": {"type": "string", "format": "binary"}}
                for media in export.FORMATS.values()
            },
        },
        **error_responses(404),
    },
)
async def export_decisions(
    simulation_id: SimulationId,
    request: Request,
    session: SessionDep,
    round: RoundFilter = None,
    format: Literal["csv", "jsonl", "parquet"] = "csv",
    attributes: Annotated[
        bool, Query(description="one column per population attribute, in config order")
    ] = False,
    persona: Annotated[bool, Query(description="a persona column")] = False,
):
    simulation = await store.get_simulation(session, simulation_id)
    # The population row outlives its agents' rows (their columns are then empty).
    population = await population_store.find_population(session, simulation.population_id)
    parts = await export_parts(session, simulation, population)
    join = export.join_for(population, attributes=attributes, persona=persona, policy=parts)
    record = export.export_record(simulation, population) if format == "parquet" else None
    values = value_type(simulation.config)
    chunks = export.stream(
        runtime_of(request).sessionmaker, simulation_id, format, round, join, record, values
    )
    return StreamingResponse(
        chunks,
        media_type=export.FORMATS[format],
        headers={
            "Content-Disposition": (
                f'attachment; filename="simulation-{simulation_id}-decisions.{format}"'
            )
        },
    )


@router.get(
    "/{simulation_id}/record",
    response_model=dict[str, Any],
    responses=error_responses(404),
)
async def get_record(simulation_id: SimulationId, session: SessionDep):
    """The run's reproducibility record (what a Parquet export carries as `populace.record`):
    the simulation's settings, seed, version, models and record, and its population's."""
    simulation = await store.get_simulation(session, simulation_id)
    population = await population_store.find_population(session, simulation.population_id)
    return export.export_record(simulation, population)
