"""The agent browser: keyset pages with filters, and one agent in full."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from backend.api.errors import error_responses, invalid_input
from backend.api.params import (
    AfterAgentId,
    AfterRound,
    AgentId,
    Limit,
    PopulationFilter,
    SimulationFilter,
    WorkerFilter,
    attribute_filter,
)
from backend.auth import require_api_token
from backend.deps import SessionDep
from backend.populations import store
from backend.populations.neighbours import neighbours_page
from backend.populations.schemas import AgentOut, AgentPage, NeighbourPage
from backend.simulations import agent_history, transcripts
from backend.simulations import store as simulation_store
from backend.simulations.schemas import TranscriptOut, TranscriptPage

router = APIRouter(
    prefix="/api/agents",
    tags=["agents"],
    dependencies=[Depends(require_api_token)],
    responses=error_responses(401, 403),
)


@router.get("", response_model=AgentPage)
async def list_agents(
    session: SessionDep,
    population_id: PopulationFilter = None,
    worker_id: WorkerFilter = None,
    attribute: Annotated[
        str | None, Query(max_length=1000, description="name:value, e.g. education:doctorate")
    ] = None,
    after: AfterAgentId = None,
    limit: Limit = 100,
):
    rows, next_after = await store.page_agents(
        session,
        population_id=population_id,
        worker_id=worker_id,
        attribute=attribute_filter(attribute),
        after=after,
        limit=limit,
    )
    return AgentPage(items=[AgentOut.model_validate(a) for a in rows], next_after=next_after)


@router.get("/{agent_id}", response_model=AgentOut, responses=error_responses(404))
async def get_agent(agent_id: AgentId, session: SessionDep):
    return await store.get_agent(session, agent_id)


@router.get("/{agent_id}/neighbors", response_model=NeighbourPage, responses=error_responses(404))
async def list_agent_neighbours(
    agent_id: AgentId,
    session: SessionDep,
    after: AfterAgentId = None,
    limit: Limit = 100,
):
    """The agent's neighbours in its population's graph, by id: each one's attributes and its
    value in the latest stored round of the population's latest simulation (null when none).
    An empty page for a population without a graph."""
    agent = await store.get_agent(session, agent_id)
    population = await store.get_population(session, agent.population_id)
    items, next_after = await neighbours_page(session, population, agent_id, after, limit)
    return NeighbourPage(items=[vars(item) for item in items], next_after=next_after)


class AgentDecisionOut(BaseModel):
    simulation_id: int
    simulation_name: str
    simulation_status: str
    round: int
    value: float | None
    status: str
    target: float | None
    winner_value: float | None
    action: float | int | str | bool | None = Field(
        description="the value in its plugin's action type (a number, a whole number, an "
        "option's name, true or false), as exports write it; null unless valid"
    )
    won: bool


class AgentDecisionPage(BaseModel):
    items: list[AgentDecisionOut]
    # "simulation:round" of the last item, to pass as `after`; None on the last page.
    next_after: str | None


@router.get(
    "/{agent_id}/decisions", response_model=AgentDecisionPage, responses=error_responses(404)
)
async def list_agent_decisions(
    agent_id: AgentId,
    session: SessionDep,
    simulation_id: SimulationFilter = None,
    after: Annotated[
        str | None,
        Query(max_length=40, description="next_after of the previous page ('simulation:round')"),
    ] = None,
    limit: Limit = 50,
):
    """The agent's decisions across the simulations of its population, newest simulation
    first. Results outlive agents: a deleted population's agents still have theirs."""
    try:
        cursor = agent_history.Cursor.parse(after) if after is not None else None
    except agent_history.BadCursor as exc:
        raise invalid_input(("query", "after"), str(exc), "value_error") from None
    await store.agent_population(session, agent_id)
    rows, next_cursor = await agent_history.agent_decisions(
        session, agent_id, simulation_id=simulation_id, after=cursor, limit=limit
    )
    return AgentDecisionPage(
        items=[AgentDecisionOut(**vars(row), won=row.won) for row in rows],
        next_after=str(next_cursor) if next_cursor is not None else None,
    )


@router.get(
    "/{agent_id}/transcripts", response_model=TranscriptPage, responses=error_responses(404)
)
async def list_agent_transcripts(
    agent_id: AgentId,
    session: SessionDep,
    simulation_id: Annotated[int, Query(ge=1, le=2**31 - 1, description="the simulation")],
    after: AfterRound = None,
    limit: Limit = 50,
):
    """The agent's rounds in one simulation: the prompt its worker sent (rebuilt, see
    backend.simulations.transcripts), the raw answer when stored, the value, and why an answer
    was invalid, late or lost."""
    simulation = await simulation_store.get_simulation(session, simulation_id)
    store.check_member(agent_id, simulation.population_id, simulation_id)
    rows, next_after = await transcripts.agent_transcripts(
        session, simulation, agent_id, after=after, limit=limit
    )
    return TranscriptPage(
        items=[TranscriptOut.model_validate(vars(r)) for r in rows], next_after=next_after
    )
