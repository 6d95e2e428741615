"""A run's group metrics (populace.plugin.Resolution.group_metrics): a round's page of groups,
one group over the rounds, and the whole as a file."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import StreamingResponse

from backend.api.errors import error_responses
from backend.api.params import AfterRound, Limit, RoundFilter, SimulationId
from backend.auth import require_api_token
from backend.db.models import INT32_MAX
from backend.deps import SessionDep, runtime_of
from backend.simulations import group_export, group_store, store
from backend.simulations.schemas import GroupOut, GroupPage, GroupRoundOut, GroupSeries

router = APIRouter(
    prefix="/api/simulations",
    tags=["simulations"],
    dependencies=[Depends(require_api_token)],
    responses=error_responses(401, 403),
)

AfterGroup = Annotated[
    int | None, Query(ge=0, le=INT32_MAX, description="last group of the previous page")
]
GroupNumber = Annotated[int, Path(ge=0, le=INT32_MAX, description="a group's number")]


def _value(value: float) -> float | None:
    return None if value != value else float(value)  # NaN: no value


@router.get("/{simulation_id}/groups", response_model=GroupPage, responses=error_responses(404))
async def list_groups(
    simulation_id: SimulationId,
    session: SessionDep,
    round: RoundFilter = None,
    after: AfterGroup = None,
    limit: Limit = 200,
):
    """One round's group metrics (the last kept round's by default), a page of groups in
    order: e.g. whether each group is at consensus and the round it got there. A run whose
    plugin declares no group metrics has none (`round` null, no items)."""
    simulation = await store.get_simulation(session, simulation_id)
    labels = simulation.group_labels or []
    chosen = round if round is not None else await group_store.last_round(session, simulation_id)
    metrics = await group_store.load(session, simulation_id, chosen) if chosen else {}
    if round is not None and not metrics and await group_store.names(session, simulation_id):
        raise group_store.NoGroupRound(round)
    names = sorted(metrics)
    groups = max((len(v) for v in metrics.values()), default=0)
    start = 0 if after is None else after + 1
    stop = min(groups, start + limit)
    items = [
        GroupOut(
            group=g,
            values={n: _value(metrics[n][g]) if g < len(metrics[n]) else None for n in names},
            label=labels[g] if g < len(labels) else None,
        )
        for g in range(start, stop)
    ]
    return GroupPage(
        round=chosen if metrics else None,
        groups=groups,
        names=names,
        items=items,
        next_after=stop - 1 if stop < groups else None,
    )


@router.get(
    "/{simulation_id}/groups/export",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "Every kept round's group metrics, one row per group per round "
            "(`round,group,<metric>...`, with a `label` after `group` when the run is grouped "
            "by an attribute; a round's when `round` is given)",
            "content": {
                media.split(";")[0]: {"schema": {"type": "string", "format": "binary"}}
                for media in group_export.FORMATS.values()
            },
        },
        **error_responses(404),
    },
)
async def export_groups(
    simulation_id: SimulationId,
    request: Request,
    session: SessionDep,
    round: RoundFilter = None,
    format: Literal["csv", "jsonl"] = "csv",
):
    simulation = await store.get_simulation(session, simulation_id)
    names = await group_store.names(session, simulation_id)
    chunks = group_export.stream(
        runtime_of(request).sessionmaker,
        simulation_id,
        format,
        names,
        round,
        simulation.group_labels,
    )
    return StreamingResponse(
        chunks,
        media_type=group_export.FORMATS[format],
        headers={
            "Content-Disposition": (
                f'attachment; filename="simulation-{simulation_id}-groups.{format}"'
            )
        },
    )


@router.get(
    "/{simulation_id}/groups/{group}", response_model=GroupSeries, responses=error_responses(404)
)
async def group_series(
    simulation_id: SimulationId,
    group: GroupNumber,
    session: SessionDep,
    after: AfterRound = None,
    limit: Limit = 200,
):
    """One group's metrics over the rounds, oldest first."""
    simulation = await store.get_simulation(session, simulation_id)
    labels = simulation.group_labels or []
    rows = await group_store.series(session, simulation_id, group, after or 0, limit + 1)
    if after is None and not rows and await group_store.names(session, simulation_id):
        raise group_store.UnknownGroup(group)
    page = rows[:limit]
    return GroupSeries(
        group=group,
        label=labels[group] if group < len(labels) else None,
        items=[GroupRoundOut(round=r, values=v) for r, v in page],
        next_after=page[-1][0] if len(rows) > limit else None,
    )
