"""Cluster routes for users: list, inspect, drain and remove workers."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response, status

from backend.auth import require_api_token
from backend.deps import HubDep, SessionDep
from backend.populations.cleanup import WorkerBusy, clean_worker
from backend.workers import registry
from backend.workers.schemas import WorkerOut, WorkerPage, WorkerState

router = APIRouter(
    prefix="/api/workers", tags=["cluster"], dependencies=[Depends(require_api_token)]
)


@router.get("", response_model=WorkerPage)
async def list_workers(
    session: SessionDep,
    after: Annotated[
        int | None, Query(description="id of the last worker of the previous page")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    state: WorkerState | None = None,
):
    rows, next_after = await registry.page(session, after=after, limit=limit, state=state)
    return WorkerPage(items=[WorkerOut.model_validate(w) for w in rows], next_after=next_after)


@router.get("/{worker_id}", response_model=WorkerOut)
async def get_worker(worker_id: int, session: SessionDep):
    try:
        return await registry.get(session, worker_id)
    except registry.UnknownWorker:
        raise HTTPException(404, f"worker {worker_id} not found") from None


@router.post("/{worker_id}/drain", response_model=WorkerOut)
async def drain_worker(worker_id: int, session: SessionDep, hub: HubDep):
    try:
        return await registry.drain(session, hub, worker_id)
    except registry.UnknownWorker:
        raise HTTPException(404, f"worker {worker_id} not found") from None
    except registry.WorkerRemoved:
        raise HTTPException(409, f"worker {worker_id} was removed; it cannot be drained") from None


@router.delete("/{worker_id}", status_code=status.HTTP_204_NO_CONTENT)
async def remove_worker(worker_id: int, request: Request, session: SessionDep, hub: HubDep):
    try:
        await registry.remove(session, hub, worker_id)
    except registry.UnknownWorker:
        raise HTTPException(404, f"worker {worker_id} not found") from None
    request.app.state.keeper.poke()  # its agents are re-placed on the workers that remain
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.delete("/{worker_id}/agents")
async def clean_worker_agents(worker_id: int, request: Request, hub: HubDep) -> dict:
    """Empty one worker: its agents move to other online workers (those that fit nowhere stay
    in the store unplaced, and their population is degraded until a repair finds room)."""
    try:
        return await clean_worker(
            request.app.state.sessionmaker, hub, request.app.state.keeper, worker_id
        )
    except registry.UnknownWorker:
        raise HTTPException(404, f"worker {worker_id} not found") from None
    except WorkerBusy as exc:
        raise HTTPException(409, str(exc)) from None
