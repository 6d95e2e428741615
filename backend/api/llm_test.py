"""POST /api/llm/test: can the workers reach these LLM endpoints, and do they serve the model?

The launch form's "Test connection". The manager never calls an LLM itself: it asks one live
worker hosting the population (the calls of a run come from the workers, through their allowed
hosts and with their API keys) to probe each endpoint with the ProbeLlm RPC, as a run does
before its first round, and answers per endpoint `{base_url, model, ok, models, error,
latency_s}`.
"""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from backend.api.bodies import CheckedJsonRoute
from backend.api.errors import error_responses
from backend.auth import require_api_token
from backend.db.models import INT32_MAX
from backend.deps import SessionDep
from backend.errors import Conflict, Unavailable
from backend.simulations.config import EndpointConfig, SimulationConfig
from backend.simulations.runner import live_hosts
from backend.simulations.spec import llm_policy
from backend.workers.grpc_client import WorkerClient
from backend.workers.plane_errors import WorkerPlaneError, WorkerRefused

router = APIRouter(
    prefix="/api/llm",
    tags=["simulations"],
    dependencies=[Depends(require_api_token)],
    responses=error_responses(401, 403),
    route_class=CheckedJsonRoute,
)

# Per endpoint (they are probed at once); the RPC gets a little more.
PROBE_TIMEOUT_S = 5.0


class LlmTestRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    population_id: int = Field(ge=1, le=INT32_MAX, description="a worker hosting it probes")
    endpoints: list[EndpointConfig] = Field(min_length=1, max_length=32)


class EndpointProbeOut(BaseModel):
    base_url: str
    model: str
    ok: bool
    models: list[str] = Field(description="the model ids the endpoint's /v1/models listed")
    error: str | None
    latency_s: float | None


class LlmTestOut(BaseModel):
    worker: str = Field(description="the address of the worker that probed")
    endpoints: list[EndpointProbeOut]


def _wire_endpoints(body: LlmTestRequest) -> list:
    """The endpoints as a run sends them (defaults by server included): the run's own code."""
    config = SimulationConfig(
        population_id=body.population_id,
        rounds=1,
        policy={"kind": "llm", "endpoints": [e.model_dump() for e in body.endpoints]},
    )
    return list(llm_policy(config, config.policy).endpoints)


def _refused(body: LlmTestRequest, refusal: WorkerRefused) -> list[EndpointProbeOut]:
    """The worker refused the request (a host it may not call): the endpoint it names carries
    the reason, the others were not probed."""
    details = refusal.message
    field = refusal.field  # ("endpoints", 0, "base_url"), or () when it names no endpoint
    index = field[1] if field[:1] == ("endpoints",) and len(field) > 1 else None
    return [
        EndpointProbeOut(
            base_url=e.base_url,
            model=e.model,
            ok=False,
            models=[],
            error=details
            if index is None or index == i
            else f"not probed: the worker refused endpoint {index + 1}",
            latency_s=None,
        )
        for i, e in enumerate(body.endpoints)
    ]


@router.post("/test", response_model=LlmTestOut, responses=error_responses(409, 422, 503))
async def test_endpoints(body: LlmTestRequest, session: SessionDep) -> LlmTestOut:
    hosts = await live_hosts(session, body.population_id)
    if not hosts:
        raise Conflict(
            f"population {body.population_id}: no live worker hosts it (is it deployed?); "
            "the endpoints are probed from a worker, as a run calls them"
        )
    address = hosts[0]
    endpoints = _wire_endpoints(body)
    try:
        async with asyncio.timeout(PROBE_TIMEOUT_S + 15), WorkerClient(address) as client:
            reply = await client.probe_llm(endpoints, timeout_s=PROBE_TIMEOUT_S)
    except WorkerRefused as exc:
        return LlmTestOut(worker=address, endpoints=_refused(body, exc))
    except WorkerPlaneError as exc:
        raise Unavailable(f"worker {address} did not answer the probe: {exc.status}") from None
    except TimeoutError:
        raise Unavailable(f"worker {address} did not answer the probe in time") from None
    return LlmTestOut(
        worker=address,
        endpoints=[
            EndpointProbeOut(
                base_url=status.base_url,
                model=status.model,
                ok=status.ok,
                models=list(status.served_models),
                error=status.error or None,
                latency_s=status.latency_s if status.ok else None,
            )
            for status in reply.endpoints
        ],
    )
