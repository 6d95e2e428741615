"""Cluster routes for users: list, inspect, drain and remove workers; their load history
(kept by the manager from heartbeats) and their recent log lines (asked of the worker)."""

from __future__ import annotations

import logging
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response, status
from pydantic import BaseModel

from backend.api.errors import error_responses
from backend.api.params import AfterId, Limit, WorkerId
from backend.auth import require_api_token
from backend.db.models import INT64_MAX
from backend.deps import HubDep, LivenessDep, SessionDep, runtime_of
from backend.errors import Gone, Unavailable
from backend.populations.cleanup import clean_worker
from backend.workers import registry
from backend.workers.grpc_client import WorkerClient
from backend.workers.history import ClusterPoint, WorkerPoint
from backend.workers.liveness import Liveness
from backend.workers.plane_errors import WorkerPlaneError
from backend.workers.schemas import (
    ClusterHistoryOut,
    ClusterHistoryPoint,
    HistoryPoint,
    LogLevel,
    LogLineOut,
    WorkerHistoryOut,
    WorkerLogsOut,
    WorkerOut,
    WorkerPage,
    WorkerState,
)
from worker_server.worker_states import REMOVED, is_live

router = APIRouter(
    prefix="/api/workers",
    tags=["cluster"],
    dependencies=[Depends(require_api_token)],
    responses=error_responses(401, 403),
)
history_router = APIRouter(
    prefix="/api/cluster",
    tags=["cluster"],
    dependencies=[Depends(require_api_token)],
    responses=error_responses(401, 403),
)

# A worker's log ring holds 2,000 lines (worker_server.logbuffer); one read asks for at most that.
MAX_LOG_LINES = 2000
# How long a worker gets to answer for its logs before the dashboard hears it did not.
LOGS_TIMEOUT_S = 5.0
LogLimit = Annotated[int, Query(ge=1, le=MAX_LOG_LINES, description="the newest lines, at most")]
LogAfter = Annotated[
    int,
    Query(
        ge=0, le=INT64_MAX, description="only lines numbered above this (a reply's last_sequence)"
    ),
]


def _out(worker, liveness: Liveness) -> WorkerOut:
    """The worker as the API shows it: its latest beat, and the cadence it is held to."""
    cadence = liveness.cadence()
    return liveness.freshen(WorkerOut.model_validate(worker)).model_copy(
        update={"heartbeat_interval_s": cadence.heartbeat_interval_s, "ttl_s": cadence.ttl_s}
    )


@router.get("", response_model=WorkerPage)
async def list_workers(
    session: SessionDep,
    liveness: LivenessDep,
    after: AfterId = None,
    limit: Limit = 100,
    state: WorkerState | None = None,
):
    rows, next_after = await registry.page(session, after=after, limit=limit, state=state)
    items = [_out(w, liveness) for w in rows]
    return WorkerPage(items=items, next_after=next_after)


@router.get("/{worker_id}", response_model=WorkerOut, responses=error_responses(404))
async def get_worker(worker_id: WorkerId, session: SessionDep, liveness: LivenessDep):
    return _out(await registry.get(session, worker_id), liveness)


@router.post(
    "/{worker_id}/drain", response_model=WorkerOut, responses=error_responses(403, 404, 409)
)
async def drain_worker(worker_id: WorkerId, session: SessionDep, liveness: LivenessDep):
    return _out(await registry.drain(session, liveness, worker_id), liveness)


@router.post(
    "/{worker_id}/undrain", response_model=WorkerOut, responses=error_responses(403, 404, 409)
)
async def undrain_worker(
    worker_id: WorkerId, request: Request, session: SessionDep, liveness: LivenessDep
):
    """Undo a drain: the worker takes new agents again (a degraded population may use it)."""
    worker = await registry.undrain(session, liveness, worker_id)
    runtime_of(request).keeper.poke()
    return _out(worker, liveness)


@router.delete(
    "/{worker_id}", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(403, 404)
)
async def remove_worker(
    worker_id: WorkerId, request: Request, session: SessionDep, liveness: LivenessDep
):
    await registry.remove(session, liveness, worker_id)
    runtime_of(request).keeper.poke()  # its agents are re-placed on the workers that remain
    return Response(status_code=status.HTTP_204_NO_CONTENT)


class CleanedPopulation(BaseModel):
    population_id: int
    agents: int
    moved: int
    unplaced: int


class CleanWorkerOut(BaseModel):
    worker_id: int
    populations: list[CleanedPopulation]
    agents_moved: int
    agents_unplaced: int


@router.delete(
    "/{worker_id}/agents", response_model=CleanWorkerOut, responses=error_responses(403, 404, 409)
)
async def clean_worker_agents(worker_id: WorkerId, request: Request, hub: HubDep) -> dict:
    """Empty one worker: its agents move to other online workers (those that fit nowhere stay
    in the store unplaced, and their population is degraded until a repair finds room)."""
    return await clean_worker(
        runtime_of(request).sessionmaker, hub, runtime_of(request).keeper, worker_id
    )


class LogsGone(Gone):
    """A removed worker's logs: its process no longer serves under this id, for good."""

    template = (
        "worker {0} was removed: its logs lived in its process, which no longer serves under "
        "this id; read the node's own log (or the logs of the worker that took its place)"
    )


def _when(epoch_s: float) -> datetime:
    return datetime.fromtimestamp(epoch_s, UTC)


def _dated(point: WorkerPoint | ClusterPoint) -> dict:
    """A history point's fields, its time as a datetime."""
    return {**asdict(point), "t": _when(point.t)}


@router.get("/{worker_id}/history", response_model=WorkerHistoryOut, responses=error_responses(404))
async def worker_history(worker_id: WorkerId, session: SessionDep, liveness: LivenessDep):
    """The worker's CPU, RSS, agents and LLM requests per second over the last hour, one point
    per bucket in which it beat (kept in the manager's memory: empty after a manager restart)."""
    await registry.get(session, worker_id)  # 404 for a worker that never was
    history = liveness.history
    points = [HistoryPoint(**_dated(p)) for p in history.worker(worker_id)]
    return WorkerHistoryOut(
        worker_id=worker_id, bucket_s=history.bucket_s, window_s=history.window_s, points=points
    )


@history_router.get("/history", response_model=ClusterHistoryOut)
async def cluster_history(liveness: LivenessDep):
    """The workers' totals over the last hour: CPU (summed percent), RSS, agents and LLM
    requests per second, one point per bucket, each the sum of the workers' points for that
    bucket (GET /api/workers/{id}/history)."""
    history = liveness.history
    points = [ClusterHistoryPoint(**_dated(p)) for p in history.cluster()]
    return ClusterHistoryOut(bucket_s=history.bucket_s, window_s=history.window_s, points=points)


@router.get(
    "/{worker_id}/logs", response_model=WorkerLogsOut, responses=error_responses(404, 410, 503)
)
async def worker_logs(
    worker_id: WorkerId,
    session: SessionDep,
    limit: LogLimit = 200,
    level: LogLevel = "debug",
    after: LogAfter = 0,
):
    """The worker's last log lines at `level` or above, oldest first, asked of the worker
    process itself (it keeps its last 2,000 lines in memory). 410 when it was removed (its
    logs are gone for good); 503 when it is offline or does not answer (it may come back)."""
    worker = await registry.get(session, worker_id)
    address, state = worker.address, worker.state
    await session.close()  # no connection held while the worker answers
    if state == REMOVED:
        raise LogsGone(worker_id)
    if not is_live(state):
        raise Unavailable(
            f"worker {worker_id} is {state}: its logs live in its process, which is not running"
        )
    try:
        async with WorkerClient(address) as client:
            reply = await client.recent_logs(
                limit=limit,
                min_level=logging.getLevelNamesMapping()[level.upper()],
                after=after,
                timeout=LOGS_TIMEOUT_S,
            )
    except WorkerPlaneError as exc:
        raise Unavailable(
            f"worker {worker_id} at {address} did not answer ({exc.status})"
        ) from None
    return WorkerLogsOut(
        worker_id=worker_id,
        lines=[
            LogLineOut(
                sequence=line.sequence,
                time=_when(line.time),
                level=line.level,
                logger=line.logger,
                message=line.message,
            )
            for line in reply.lines
        ],
        last_sequence=reply.last_sequence,
        first_sequence=reply.first_sequence,
        capacity=reply.capacity,
    )
