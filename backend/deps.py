"""FastAPI dependency aliases shared by the route modules.

All `async def`, even without I/O: a plain `def` dependency runs in FastAPI's thread pool.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.requests import HTTPConnection

from backend.events.hub import EventHub
from backend.runtime import Runtime
from backend.settings import ManagerSettings
from backend.workers.liveness import Liveness


def runtime_of(connection: HTTPConnection) -> Runtime:
    """The manager's services (backend.runtime), kept on the app by backend.app."""
    return connection.app.state.runtime


async def _session(request: Request) -> AsyncIterator[AsyncSession]:
    async with runtime_of(request).sessionmaker() as session:
        yield session


async def _hub(request: Request) -> EventHub:
    return runtime_of(request).hub


async def _settings(request: Request) -> ManagerSettings:
    return runtime_of(request).settings


async def _liveness(request: Request) -> Liveness:
    return runtime_of(request).liveness


SessionDep = Annotated[AsyncSession, Depends(_session)]
HubDep = Annotated[EventHub, Depends(_hub)]
SettingsDep = Annotated[ManagerSettings, Depends(_settings)]
LivenessDep = Annotated[Liveness, Depends(_liveness)]
