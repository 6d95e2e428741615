"""The manager's background loops stop when cancelled, even when the cancelled database call
raises a driver's error instead of CancelledError (issue 26, item 2), and the metrics rollback
hook does not raise on an invalidated connection (which is how that replacement happened)."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text
from sqlalchemy.exc import PendingRollbackError
from sqlalchemy.ext.asyncio import create_async_engine

from backend.events.hub import EventHub
from backend.metrics import ManagerMetrics
from backend.populations.cleanup import reap_forever
from backend.populations.keeper import PlacementKeeper
from backend.simulations.timeline import RunTimeline
from backend.workers.liveness import Liveness
from tests.support_events import simulation_updated


class _BlockedStore:
    """Sessions whose first database call blocks until cancelled, then fails the way a
    cancelled asyncpg query did: PendingRollbackError, the CancelledError only its context.
    Once `honest`, a cancelled call raises CancelledError (so a test can always clean up)."""

    def __init__(self) -> None:
        self.calls = 0
        self.honest = False
        self.called = asyncio.Event()

    def __call__(self) -> _BlockedStore:
        return self

    async def __aenter__(self):
        self.calls += 1
        self.called.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            if self.honest:
                raise
            # As the driver did: the CancelledError is the context, not the cause.
            raise PendingRollbackError(  # noqa: B904
                "Can't reconnect until invalid transaction is rolled back"
            )

    async def __aexit__(self, *exc) -> None:
        return None


def _liveness() -> Liveness:
    return Liveness(
        EventHub(),
        heartbeat_interval_s=1.0,
        ttl_s=3.0,
        max_beats_per_s=60.0,
        flush_s=0.01,
        sweep_s=0.01,
    )


def _timeline(sessionmaker) -> RunTimeline:
    hub = EventHub()
    timeline = RunTimeline(hub, sessionmaker)
    timeline.subscribe()
    hub.publish(simulation_updated(1, "running"))
    return timeline


LOOPS = {
    "liveness": lambda sm: _liveness().run_forever(sm),
    "keeper": lambda sm: PlacementKeeper(
        sm, EventHub(), replace_after_s=10, interval_s=0.01
    ).run_forever(),
    "reaper": lambda sm: reap_forever(sm, _liveness(), every_s=0.01),
    "timeline": lambda sm: _timeline(sm).run_forever(),
}


@pytest.mark.parametrize("loop", sorted(LOOPS))
async def test_a_loop_stops_when_its_cancelled_db_call_raises_another_error(loop):
    store = _BlockedStore()
    task = asyncio.create_task(LOOPS[loop](store))
    try:
        await asyncio.wait_for(store.called.wait(), 10)  # blocked in its first database call
        task.cancel()
        # Before the fix the loop logged "failed; retrying" and went on (or waited) forever.
        done, _ = await asyncio.wait({task}, timeout=10)
        assert task in done, f"the {loop} loop did not stop when cancelled"
        assert task.cancelled()
        assert store.calls == 1, "the loop made another database call after its cancellation"
    finally:
        store.honest = True
        while not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=0.1)


async def test_rollback_hook_tolerates_an_invalidated_connection():
    engine = create_async_engine("sqlite+aiosqlite://")
    ManagerMetrics().watch_engine(engine)
    try:
        async with engine.connect() as conn:
            await conn.begin()
            await conn.execute(text("select 1"))
            await conn.invalidate()
            # Before the fix the hook's `conn.info` raised PendingRollbackError here.
            await conn.rollback()
            assert conn.invalidated
    finally:
        await engine.dispose()
