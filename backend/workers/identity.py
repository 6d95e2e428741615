"""A worker's identity outlives its process: (node, slot) names the same worker across restarts.

A process registering with the identity of an existing worker takes that worker's row over
(same id, new lease), unless the row's own process is still alive and serving elsewhere: then
the newcomer is a duplicate (two nodes started with the same --node, say) and is refused, so it
cannot steal a live worker's agents.
"""

from __future__ import annotations

from datetime import timedelta

import grpc
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import Worker
from backend.workers import registry
from backend.workers.grpc_client import WorkerClient
from backend.workers.schemas import RegisterRequest

# Asking the current holder whether it is still there must not hold a registration up long.
PROBE_TIMEOUT_S = 1.0


class IdentityInUse(Exception):
    pass


async def claim_identity(
    session: AsyncSession, request: RegisterRequest, ttl_s: float
) -> Worker | None:
    """The worker row this registration takes over, or None for a new worker.

    Raises IdentityInUse when a live process still holds the identity."""
    if request.slot is None:
        return None
    holder = await registry.holder_of_identity(session, request.node, request.slot)
    await session.commit()  # end the read; the registration writes in its own transaction
    if holder is None:
        return None
    fresh = holder.last_heartbeat > registry.utcnow() - timedelta(seconds=ttl_s)
    if holder.state in ("online", "draining") and fresh and await _serving(holder):
        raise IdentityInUse(
            f"worker {holder.id} (node {holder.node!r}, slot {holder.slot}) is alive at "
            f"{holder.address} (pid {holder.pid}); give this process another --node or stop that one"
        )
    return holder


async def _serving(holder: Worker) -> bool:
    """Whether the holder's own process (its pid) answers at its address."""
    try:
        async with WorkerClient(holder.address) as client:
            info = await client.info(timeout=PROBE_TIMEOUT_S)
    except grpc.aio.AioRpcError:
        return False
    return info.pid == holder.pid
