"""GET /api/metrics: the manager's series in Prometheus's text format, behind a token (the API
or viewer token, or the metrics token that reads nothing else: backend.auth)."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from backend.api.errors import error_responses
from backend.auth import require_metrics_token
from backend.deps import runtime_of

log = logging.getLogger(__name__)

router = APIRouter(prefix="/api", tags=["metrics"])


@router.get(
    "/metrics",
    dependencies=[Depends(require_metrics_token)],
    response_class=Response,
    responses={
        200: {
            "description": "Prometheus text exposition format 0.0.4",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        },
        **error_responses(401),
    },
    summary="Prometheus metrics of the manager",
)
async def metrics(request: Request) -> Response:
    runtime = runtime_of(request)
    try:
        async with runtime.sessionmaker() as session:
            await runtime.metrics.refresh(session)
    except Exception as exc:  # the store's gauges go missing; the rest is still worth a scrape
        log.warning("metrics: cannot read the store (%s)", type(exc).__name__)
        runtime.metrics.store_unreadable()
    return Response(generate_latest(runtime.metrics.registry), media_type=CONTENT_TYPE_LATEST)
