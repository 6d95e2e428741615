"""A worker's identity outlives its process: (node, slot) names the same worker across restarts.

A process registering with the identity of an existing worker takes that worker's row over
(same id, new lease), unless the row's own process is still alive and serving: then the
newcomer is another process claiming the same name (two nodes started with the same --node on
one host, say). It must not steal a live worker's agents, so it registers as a worker of its
own, without the identity, and the manager logs why.

The address settles the rest: a registration is verified to serve at its address before it gets
here, so an older live row at that address is the same process registering again (it is given
that row) or a process that is gone (marked offline at once).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import Worker
from backend.workers import registry
from backend.workers.grpc_client import WorkerClient
from backend.workers.plane_errors import WorkerPlaneError
from backend.workers.schemas import RegisterRequest
from worker_server.worker_states import is_live

if TYPE_CHECKING:
    from backend.workers.liveness import Liveness

log = logging.getLogger(__name__)

# Asking the current holder whether it is still there must not hold a registration up long.
PROBE_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class Claim:
    # The row to take over (a restarted process), or None for a new worker.
    previous: Worker | None
    # The registration as it will be stored (slot dropped when the identity is in use).
    request: RegisterRequest


async def claim_identity(
    session: AsyncSession, liveness: Liveness, request: RegisterRequest
) -> Claim:
    if request.slot is None:
        return Claim(None, request)
    holder = await registry.holder_of_identity(session, request.node, request.slot)
    await session.commit()  # end the read; the registration writes in its own transaction
    if holder is None:
        return Claim(None, request)
    if _same_process(holder, request):
        return Claim(holder, request)  # registering again (its first answer was lost, say)
    live = is_live(holder.state) and liveness.is_live(holder.id)
    if live and await _serving(holder):
        log.warning(
            "%s (pid %s) claims node %r slot %s, which worker %s at %s (pid %s) holds and "
            "serves: registered as a new worker without that identity; give each node its own "
            "--node",
            request.address,
            request.pid,
            request.node,
            request.slot,
            holder.id,
            holder.address,
            holder.pid,
        )
        return Claim(None, request.model_copy(update={"slot": None}))
    return Claim(holder, request)


async def settle_address(session: AsyncSession, liveness: Liveness, claim: Claim) -> Claim:
    """The registering process was just verified to serve at its address, so another live row
    at that address is either this very process (then it is the row to take over) or a process
    that is gone (marked offline now, so its agents move without waiting for the TTL)."""
    besides = claim.previous.id if claim.previous is not None else None
    holder = await registry.live_holder_of_address(
        session, liveness, claim.request.address, besides=besides
    )
    if holder is None:
        return claim
    if claim.previous is None and _same_process(holder, claim.request):
        return Claim(holder, claim.request)
    await registry.mark_offline(session, liveness, holder.id)
    return claim


def _same_process(row: Worker, request: RegisterRequest) -> bool:
    return (row.address, row.pid, row.node) == (request.address, request.pid, request.node)


async def _serving(holder: Worker) -> bool:
    """Whether the holder's own process (its pid) answers at its address."""
    try:
        async with WorkerClient(holder.address) as client:
            info = await client.info(timeout=PROBE_TIMEOUT_S)
    except WorkerPlaneError:
        return False
    return info.pid == holder.pid
