"""Background sweep that turns silent workers offline (TTL on heartbeats)."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from sqlalchemy.ext.asyncio import async_sessionmaker

from backend.events.hub import EventHub
from backend.workers import registry

log = logging.getLogger(__name__)


async def sweep_forever(
    sessionmaker: async_sessionmaker,
    hub: EventHub,
    ttl_s: float,
    every_s: float,
    startup_grace_s: float = 0.0,
) -> None:
    """startup_grace_s: a worker registered before this manager started is not marked offline
    this soon after the start. Workers that lost the manager retry with a backoff (up to
    BACKOFF_CAP_S, 10 s), so their first heartbeat to a restarted manager may come later than
    one TTL; workers registering after the start are judged by the TTL alone."""
    started = registry.utcnow()
    grace_ends = started + timedelta(seconds=startup_grace_s)
    while True:
        try:
            spare = started if registry.utcnow() < grace_ends else None
            async with sessionmaker() as session:
                gone = await registry.mark_silent_offline(
                    session, hub, ttl_s, spare_registered_before=spare
                )
            for worker in gone:
                log.warning("worker %s at %s missed heartbeats: offline", worker.id, worker.address)
        except asyncio.CancelledError:
            raise
        except Exception:  # a transient DB error must not end liveness tracking
            log.exception("liveness sweep failed; retrying")
        await asyncio.sleep(every_s)
