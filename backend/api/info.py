"""Health and manager info."""

from __future__ import annotations

from importlib.metadata import version
from typing import Literal

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel

from backend.api.errors import error_responses
from backend.auth import require_api_token
from backend.deps import SettingsDep, runtime_of

health_router = APIRouter(tags=["health"])
router = APIRouter(
    prefix="/api",
    tags=["info"],
    dependencies=[Depends(require_api_token)],
    responses=error_responses(401, 403),
)


class HealthOut(BaseModel):
    status: Literal["ok"]


class InfoOut(BaseModel):
    version: str
    database: str
    role: Literal["operator", "viewer"]
    heartbeat_interval_s: float
    worker_ttl_s: float


@health_router.get("/healthz", response_model=HealthOut)
async def healthz():
    return {"status": "ok"}


@router.get("/info", response_model=InfoOut)
async def info(request: Request, settings: SettingsDep):
    cadence = runtime_of(request).liveness.cadence()
    return {
        "version": version("populace"),
        "database": settings.database_kind,
        # operator or viewer (read-only), so the dashboard shows only the actions the caller may take
        "role": request.state.role,
        # The cadence workers are asked to keep now: it grows with the fleet.
        "heartbeat_interval_s": cadence.heartbeat_interval_s,
        "worker_ttl_s": cadence.ttl_s,
    }


@router.get("/openapi.json", include_in_schema=False)
async def openapi_schema(request: Request):
    return request.app.openapi()
