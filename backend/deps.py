"""FastAPI dependency aliases shared by the route modules.

All `async def`, even without I/O: a plain `def` dependency runs in FastAPI's thread pool.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncSession

from backend.events.hub import EventHub
from backend.settings import ManagerSettings
from backend.workers.liveness import Liveness


async def _session(request: Request) -> AsyncIterator[AsyncSession]:
    async with request.app.state.sessionmaker() as session:
        yield session


async def _hub(request: Request) -> EventHub:
    return request.app.state.hub


async def _settings(request: Request) -> ManagerSettings:
    return request.app.state.settings


async def _liveness(request: Request) -> Liveness:
    return request.app.state.liveness


SessionDep = Annotated[AsyncSession, Depends(_session)]
HubDep = Annotated[EventHub, Depends(_hub)]
SettingsDep = Annotated[ManagerSettings, Depends(_settings)]
LivenessDep = Annotated[Liveness, Depends(_liveness)]
