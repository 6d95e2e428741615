"""Interviews of agents: ask one (the answer streams back as NDJSON), list past ones.

POST /api/agents/{agent_id}/interviews streams `application/x-ndjson`, one JSON object a line:
`{"type": "delta", "text": ...}` as the answer arrives, then `{"type": "done", "interview":
{...}}` (status answered, or failed with its error), or `{"type": "error", "detail": ...}` when
the manager itself could not finish it. Refusals come before the stream, as plain HTTP errors.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Annotated

import orjson
from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, field_validator

from backend.api.bodies import CheckedJsonRoute
from backend.api.errors import error_responses
from backend.api.params import AfterId, AgentId, Limit, SimulationFilter, SimulationId
from backend.auth import require_api_token
from backend.db.models import INT32_MAX
from backend.db.times import utc_iso
from backend.deps import SessionDep, runtime_of
from backend.interviews import service, store
from backend.populations import store as population_store
from backend.simulations import store as simulation_store

router = APIRouter(
    tags=["interviews"],
    dependencies=[Depends(require_api_token)],
    responses=error_responses(401, 403),
    route_class=CheckedJsonRoute,
)

WireTime = Annotated[datetime, PlainSerializer(utc_iso, return_type=str)]


class InterviewIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    simulation_id: int = Field(ge=1, le=INT32_MAX, description="the run to ask about")
    question: str = Field(max_length=service.MAX_QUESTION_CHARS)

    @field_validator("question")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("question must not be empty")
        return value.strip()


class InterviewOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    simulation_id: int
    agent_id: int
    question: str
    answer: str
    status: str = Field(description="answering, answered or failed")
    error: str | None = None
    prompt: str = Field(description="the exact prompt the worker sent to the LLM")
    model: str
    prompt_tokens: int
    completion_tokens: int
    created_at: WireTime
    finished_at: WireTime | None = None


class InterviewPage(BaseModel):
    items: list[InterviewOut]
    # The id of the last item, to pass as `after`; None on the last page. Newest first.
    next_after: int | None


def _line(event: dict) -> bytes:
    return orjson.dumps(event) + b"\n"


async def _ndjson(events: AsyncIterator) -> AsyncIterator[bytes]:
    try:
        async for event in events:
            if isinstance(event, service.Delta):
                yield _line({"type": "delta", "text": event.text})
            else:
                interview = InterviewOut.model_validate(event.interview).model_dump(mode="json")
                yield _line({"type": "done", "interview": interview})
    except RuntimeError as exc:
        yield _line({"type": "error", "detail": str(exc)})


@router.post(
    "/api/agents/{agent_id}/interviews",
    response_class=StreamingResponse,
    responses={
        **error_responses(404, 409, 422, 503),
        200: {
            # One JSON object a line: {"type": "delta", "text"}, then "done" or "error".
            "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
            "description": "the answer, streamed",
        },
    },
)
async def interview_agent(agent_id: AgentId, body: InterviewIn, request: Request):
    """Ask the agent a question about the run; its worker answers in character from its
    persona and its memory of the run, with the run's LLM."""
    events = await service.open_interview(
        runtime_of(request), agent_id, body.simulation_id, body.question
    )
    return StreamingResponse(
        _ndjson(events),
        media_type="application/x-ndjson",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


@router.get(
    "/api/agents/{agent_id}/interviews",
    response_model=InterviewPage,
    responses=error_responses(404),
)
async def list_agent_interviews(
    agent_id: AgentId,
    session: SessionDep,
    simulation_id: SimulationFilter = None,
    after: AfterId = None,
    limit: Limit = 20,
):
    """The agent's interviews, newest first (those of one run with simulation_id)."""
    await population_store.agent_population(session, agent_id)
    rows, next_after = await store.page_interviews(
        session, agent_id=agent_id, simulation_id=simulation_id, after=after, limit=limit
    )
    return InterviewPage(items=rows, next_after=next_after)


@router.get(
    "/api/simulations/{simulation_id}/interviews",
    response_model=InterviewPage,
    responses=error_responses(404),
)
async def list_simulation_interviews(
    simulation_id: SimulationId,
    session: SessionDep,
    after: AfterId = None,
    limit: Limit = 20,
):
    """Every interview about the run, newest first."""
    await simulation_store.get_simulation(session, simulation_id)
    rows, next_after = await store.page_interviews(
        session, simulation_id=simulation_id, after=after, limit=limit
    )
    return InterviewPage(items=rows, next_after=next_after)
