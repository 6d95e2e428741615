"""The agent browser: keyset pages with filters, and one agent in full."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query

from backend.auth import require_api_token
from backend.deps import SessionDep
from backend.populations import store
from backend.populations.schemas import AgentOut, AgentPage

router = APIRouter(prefix="/api/agents", tags=["agents"], dependencies=[Depends(require_api_token)])


def _attribute_filter(attribute: str | None) -> tuple[str, str] | None:
    if attribute is None:
        return None
    name, sep, value = attribute.partition(":")
    if not sep or not name or not value:
        raise HTTPException(422, "attribute: expected name:value, e.g. education:doctorate")
    return name, value


@router.get("", response_model=AgentPage)
async def list_agents(
    session: SessionDep,
    population_id: int | None = None,
    worker_id: int | None = None,
    attribute: Annotated[
        str | None, Query(description="name:value, e.g. education:doctorate")
    ] = None,
    after: Annotated[
        int | None, Query(description="id of the last agent of the previous page")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
):
    rows, next_after = await store.page_agents(
        session,
        population_id=population_id,
        worker_id=worker_id,
        attribute=_attribute_filter(attribute),
        after=after,
        limit=limit,
    )
    return AgentPage(items=[AgentOut.model_validate(a) for a in rows], next_after=next_after)


@router.get("/{agent_id}", response_model=AgentOut)
async def get_agent(agent_id: int, session: SessionDep):
    try:
        return await store.get_agent(session, agent_id)
    except store.UnknownAgent:
        raise HTTPException(404, f"agent {agent_id} not found") from None
