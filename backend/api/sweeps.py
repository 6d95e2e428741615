"""Sweeps: launch a grid of simulations as one unit (202 + events on `sweep:{id}`), follow it
with its results table, cancel it, delete it with its runs' results."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request, status
from pydantic import ValidationError

from backend.api.bodies import invalid_body, read_config
from backend.api.errors import error_responses
from backend.api.openapi import config_body
from backend.api.params import AfterId, Limit
from backend.auth import require_api_token
from backend.db.models import INT32_MAX
from backend.deps import HubDep, SessionDep, runtime_of
from backend.lifecycles import simulation as simulation_lifecycle
from backend.populations import store as population_store
from backend.simulations import store as simulation_store
from backend.simulations.config import check_against_population, raise_at
from backend.sweeps import runner, store
from backend.sweeps.config import MAX_RUNS, SweepConfig, params_key, parse_sweep
from backend.sweeps.schemas import SweepDetail, SweepOut, SweepPage, SweepResults, SweepRow

router = APIRouter(
    prefix="/api/sweeps",
    tags=["sweeps"],
    dependencies=[Depends(require_api_token)],
    responses=error_responses(401, 403),
)

SweepId = Annotated[int, Path(ge=1, le=INT32_MAX, description="a sweep's id")]
AfterPoint = Annotated[
    int | None,
    Query(ge=0, le=MAX_RUNS, description="results: the last point of the previous page"),
]


async def _check_populations(session, config: SweepConfig) -> None:
    """Every population exists and can play, and every point fits the populations it may run
    on (their attribute names), before anything is stored."""
    attributes: dict[int, set[str]] = {}
    for i, pid in enumerate(config.populations):
        try:
            population = await population_store.get_population(session, pid)
        except population_store.UnknownPopulation:
            raise_at("SweepConfig", [(("populations", i), f"population {pid} does not exist", pid)])
        population_store.require_playable(population, "only a deployed population can play")
        attributes[pid] = {d["name"] for d in (population.config or {}).get("distributions", [])}
    n = len(config.populations)
    for point in range(config.runs):
        # Sequence: point i always runs on populations[i % n]; parallel: on any of them.
        pids = [config.populations[point % n]] if config.mode == "sequence" else config.populations
        for pid in pids:
            try:
                check_against_population(config.simulation_config(point, pid), attributes[pid])
            except ValidationError as exc:
                raise_at(
                    "SweepConfig",
                    [
                        (
                            ("points", point + 1, *e["loc"]),
                            f"{e['msg']} (population {pid})",
                            None,
                        )
                        for e in exc.errors(include_url=False)
                    ],
                )


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=SweepOut,
    openapi_extra=config_body(SweepConfig),
    responses=error_responses(403, 409, 413, 422),
)
async def create_sweep(request: Request, session: SessionDep):
    """Launch a sweep: the sweep file as JSON, or YAML with Content-Type application/yaml.
    Every point is checked first; nothing is stored when one does not fit."""
    config = await read_config(request, parse_sweep)
    try:
        await _check_populations(session, config)
    except ValidationError as exc:
        raise invalid_body(exc) from None
    return await runner.start_sweep(runtime_of(request), config)


@router.get("", response_model=SweepPage)
async def list_sweeps(session: SessionDep, after: AfterId = None, limit: Limit = 100):
    rows, next_after = await store.list_sweeps(session, after=after, limit=limit)
    return SweepPage(items=[SweepOut.model_validate(s) for s in rows], next_after=next_after)


def _row(point: int, params: dict[str, Any], run, last) -> SweepRow:
    row = SweepRow(point=point, params=params)
    if run is None:
        return row
    row.simulation_id, row.population_id, row.status = run.id, run.population_id, run.status
    row.rounds, row.rounds_played, row.error = run.rounds, run.current_round, run.error
    row.prompt_tokens, row.completion_tokens = run.prompt_tokens, run.completion_tokens
    if last is not None:
        row.rounds_played = last.round
        row.final_mean, row.target, row.winner_value = last.mean, last.target, last.winner_value
        row.n_valid = last.n_valid
    return row


@router.get("/{sweep_id}", response_model=SweepDetail, responses=error_responses(404))
async def get_sweep(
    sweep_id: SweepId, session: SessionDep, after: AfterPoint = None, limit: Limit = 100
):
    """The sweep, its grid, and its results table: one row per point, in grid order, paged by
    point (`after`, `limit`)."""
    sweep = await store.get_sweep(session, sweep_id)
    config = SweepConfig.model_validate(sweep.config)
    runs = await simulation_store.sweep_runs(session, sweep_id)
    by_point = {params_key(r.sweep_params or {}): r for r in runs}
    points = list(enumerate(config.points(), start=1))
    start = after or 0
    page = points[start : start + limit]
    page_runs = [by_point.get(params_key(p)) for _, p in page]
    last = await simulation_store.last_rounds(session, [r.id for r in page_runs if r is not None])
    rows = [
        _row(number, params, run, last.get(run.id) if run is not None else None)
        for (number, params), run in zip(page, page_runs, strict=True)
    ]
    more = start + limit < len(points)
    return SweepDetail(
        **SweepOut.model_validate(sweep).model_dump(),
        config=sweep.config,
        grid=config.grid,
        launched=len(runs),
        finished=sum(simulation_lifecycle.is_final(r.status) for r in runs),
        results=SweepResults(items=rows, next_after=page[-1][0] if more and page else None),
    )


@router.post(
    "/{sweep_id}/cancel", response_model=SweepOut, responses=error_responses(403, 404, 409)
)
async def cancel(sweep_id: SweepId, request: Request, session: SessionDep):
    """Stop launching runs and cancel the live ones; the finished runs keep their results."""
    return await runner.cancel(runtime_of(request), session, sweep_id)


@router.delete(
    "/{sweep_id}", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(403, 404, 409)
)
async def delete_sweep(sweep_id: SweepId, session: SessionDep, hub: HubDep):
    """A finished sweep, with every run's rounds and decisions. A running one is 409: cancel
    it first."""
    await runner.delete(session, hub, sweep_id)
