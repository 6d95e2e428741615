"""Routes workers call: register, heartbeat, deregister. Authenticated with the join token."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request, Response, status

from backend.api.bodies import CheckedJsonRoute
from backend.api.errors import error_responses
from backend.api.params import WorkerId
from backend.auth import require_join_token
from backend.deps import LivenessDep, SessionDep, runtime_of
from backend.workers import registry
from backend.workers.identity import claim_identity, settle_address
from backend.workers.schemas import (
    DeregisterRequest,
    HeartbeatRequest,
    HeartbeatResponse,
    RegisterRequest,
    RegisterResponse,
)
from backend.workers.verify import admit

router = APIRouter(
    prefix="/api/workers",
    tags=["worker plane"],
    dependencies=[Depends(require_join_token)],
    responses=error_responses(401, 413),
    route_class=CheckedJsonRoute,
)


@router.post(
    "/register",
    status_code=status.HTTP_201_CREATED,
    response_model=RegisterResponse,
    responses=error_responses(403, 409, 503),
)
async def register(
    body: RegisterRequest,
    request: Request,
    session: SessionDep,
    liveness: LivenessDep,
):
    verified = await admit(session, liveness, body)
    body = body.model_copy(update={"capacity": verified.capacity})
    claim = await claim_identity(session, liveness, body)
    claim = await settle_address(session, liveness, claim)
    worker = await registry.register(session, liveness, claim.request, reuse=claim.previous)
    if claim.previous is not None and worker.id == claim.previous.id:
        # The same worker, restarted: it is given back its agents.
        runtime_of(request).keeper.worker_registered_again(worker.id)
    cadence = liveness.cadence()
    return RegisterResponse(
        id=worker.id,
        lease=worker.lease,
        heartbeat_interval_s=cadence.heartbeat_interval_s,
        ttl_s=cadence.ttl_s,
    )


@router.post(
    "/{worker_id}/heartbeat",
    response_model=HeartbeatResponse,
    responses=error_responses(404, 409, 410),
)
async def heartbeat(
    worker_id: WorkerId, body: HeartbeatRequest, request: Request, liveness: LivenessDep
):
    # Most beats are kept in memory and never open a database session (see liveness). The
    # registry's refusals answer 404 (unknown: register again), 409 (another registration
    # holds the id) or 410 (removed).
    state = await liveness.heartbeat(runtime_of(request).sessionmaker, worker_id, body)
    cadence = liveness.cadence()
    answer = HeartbeatResponse(
        state=state, heartbeat_interval_s=cadence.heartbeat_interval_s, ttl_s=cadence.ttl_s
    )
    # The most frequent call answers with bytes: no second validation of its own answer.
    return Response(answer.model_dump_json(), media_type="application/json")


@router.post("/{worker_id}/deregister", status_code=status.HTTP_204_NO_CONTENT)
async def deregister(
    worker_id: WorkerId, body: DeregisterRequest, session: SessionDep, liveness: LivenessDep
):
    try:
        await registry.remove(session, liveness, worker_id, body.lease)
    except registry.UnknownWorker:
        pass  # idempotent; and a stale lease must not remove the row's new owner
    return Response(status_code=status.HTTP_204_NO_CONTENT)
