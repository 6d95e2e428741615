"""Background sweep that turns silent workers offline (TTL on heartbeats)."""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy.ext.asyncio import async_sessionmaker

from backend.events.hub import EventHub
from backend.workers import registry

log = logging.getLogger(__name__)


async def sweep_forever(
    sessionmaker: async_sessionmaker, hub: EventHub, ttl_s: float, every_s: float
) -> None:
    while True:
        try:
            async with sessionmaker() as session:
                gone = await registry.mark_silent_offline(session, hub, ttl_s)
            for worker in gone:
                log.warning("worker %s at %s missed heartbeats: offline", worker.id, worker.address)
        except asyncio.CancelledError:
            raise
        except Exception:  # a transient DB error must not end liveness tracking
            log.exception("liveness sweep failed; retrying")
        await asyncio.sleep(every_s)
