"""Cluster routes for users: list, inspect, drain and remove workers."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Request, Response, status

from backend.api.errors import error_responses
from backend.api.params import AfterId, Limit, WorkerId
from backend.auth import require_api_token
from backend.deps import HubDep, LivenessDep, SessionDep
from backend.populations.cleanup import WorkerBusy, clean_worker
from backend.workers import registry
from backend.workers.liveness import Liveness
from backend.workers.schemas import WorkerOut, WorkerPage, WorkerState

router = APIRouter(
    prefix="/api/workers",
    tags=["cluster"],
    dependencies=[Depends(require_api_token)],
    responses=error_responses(401, 403),
)


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
    try:
        worker = await registry.drain(session, liveness, worker_id)
        return _out(worker, liveness)
    except registry.WorkerRemoved:
        raise HTTPException(409, f"worker {worker_id} was removed; it cannot be drained") from None


@router.post(
    "/{worker_id}/undrain", response_model=WorkerOut, responses=error_responses(403, 404, 409)
)
async def undrain_worker(
    worker_id: WorkerId, request: Request, session: SessionDep, liveness: LivenessDep
):
    """Undo a drain: the worker takes new agents again (a degraded population may use it)."""
    try:
        worker = await registry.undrain(session, liveness, worker_id)
    except registry.WorkerRemoved:
        raise HTTPException(
            409, f"worker {worker_id} was removed; it cannot be undrained"
        ) from None
    request.app.state.keeper.poke()
    return _out(worker, liveness)


@router.delete(
    "/{worker_id}", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(403, 404)
)
async def remove_worker(
    worker_id: WorkerId, request: Request, session: SessionDep, liveness: LivenessDep
):
    await registry.remove(session, liveness, worker_id)
    request.app.state.keeper.poke()  # its agents are re-placed on the workers that remain
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.delete("/{worker_id}/agents", responses=error_responses(403, 404, 409))
async def clean_worker_agents(worker_id: WorkerId, request: Request, hub: HubDep) -> dict:
    """Empty one worker: its agents move to other online workers (those that fit nowhere stay
    in the store unplaced, and their population is degraded until a repair finds room)."""
    try:
        return await clean_worker(
            request.app.state.sessionmaker, hub, request.app.state.keeper, worker_id
        )
    except WorkerBusy as exc:
        raise HTTPException(409, str(exc)) from None
