"""The manager's running services, in one typed object (issue 30, item 3).

The app factory (backend.app) builds one Runtime and keeps it on the app; routes get it through
backend.deps, and domain services (launching, cancelling and resuming runs, sweeps, interviews,
the start-up reconciliation) take it as an argument. So no domain module needs the web framework
to find the database or the event hub, and a reader sees in one place what the manager runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the services import this module for its type: no cycle at run time
    from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

    from backend.db.write_fence import WriteFence
    from backend.events.hub import EventHub
    from backend.metrics import ManagerMetrics
    from backend.populations.keeper import PlacementKeeper
    from backend.settings import ManagerSettings
    from backend.shutdown import Shutdown
    from backend.simulations.runner import RunningSimulations
    from backend.simulations.timeline import RunTimeline
    from backend.sweeps.runner import RunningSweeps
    from backend.workers.liveness import Liveness


@dataclass(eq=False)
class Runtime:
    """What the manager runs. The first group exists from the app's creation; the database and
    what needs it (engine, sessionmaker, keeper, timeline) from the start of serving."""

    settings: ManagerSettings
    shutdown: Shutdown
    fence: WriteFence
    hub: EventHub
    liveness: Liveness
    metrics: ManagerMetrics
    simulations: RunningSimulations
    sweeps: RunningSweeps
    # Tasks started on behalf of requests (deletes, deploys, interviews, resumed runs):
    # cancelled and awaited at shutdown.
    background: set[asyncio.Task] = field(default_factory=set)
    engine: AsyncEngine | None = None
    sessionmaker: async_sessionmaker[AsyncSession] | None = None
    keeper: PlacementKeeper | None = None
    timeline: RunTimeline | None = None

    def spawn(self, coroutine: Coroutine[Any, Any, Any], name: str | None = None) -> asyncio.Task:
        """Run a coroutine in the background, kept until it ends (and cancelled at shutdown)."""
        task = asyncio.create_task(coroutine, name=name)
        self.background.add(task)
        task.add_done_callback(self.background.discard)
        return task
