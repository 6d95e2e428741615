"""The SQL of interviews: their rows, and what an interviewed agent remembers of the run.

Pages are newest first by id; `after` is the id of the last row of the previous page. Both lists
are served by an index ending in id (agent, simulation, id) and (simulation, id).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import Interview
from backend.db.times import utcnow
from backend.lifecycles import interview as lifecycle
from backend.simulations import store as simulation_store
from backend.workers import registry

# Rounds of the run an interviewed agent remembers (the latest): enough for its story, and a
# prompt a small model's context still holds.
MEMORY_ROUNDS = 30


@dataclass(frozen=True)
class RememberedRound:
    round: int
    value: float | None
    status: str
    target: float | None
    winner_value: float | None


async def create_interview(
    session: AsyncSession, simulation_id: int, agent_id: int, question: str
) -> Interview:
    row = Interview(
        simulation_id=simulation_id,
        agent_id=agent_id,
        question=question,
        prompt="",
        answer="",
        status=lifecycle.ANSWERING,
        model="",
        prompt_tokens=0,
        completion_tokens=0,
        created_at=utcnow(),
    )
    session.add(row)
    await session.commit()
    await session.refresh(row)
    return row


async def finish_interview(
    session: AsyncSession,
    interview_id: int,
    *,
    answer: str,
    prompt: str = "",
    model: str = "",
    prompt_tokens: int = 0,
    completion_tokens: int = 0,
    error: str | None = None,
) -> Interview:
    """Mark it answered, or failed when `error` is set (the answer so far is kept)."""
    await session.execute(
        update(Interview)
        .where(Interview.id == interview_id)
        .values(
            answer=answer,
            prompt=prompt,
            model=model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            status=lifecycle.FAILED if error else lifecycle.ANSWERED,
            error=error or None,
            finished_at=utcnow(),
        )
    )
    await session.commit()
    row = await session.get(Interview, interview_id, populate_existing=True)
    assert row is not None
    return row


async def page_interviews(
    session: AsyncSession,
    *,
    simulation_id: int | None = None,
    agent_id: int | None = None,
    after: int | None = None,
    limit: int = 20,
) -> tuple[list[Interview], int | None]:
    """Newest first; the id to pass as `after` for the next page (None on the last)."""
    stmt = select(Interview).order_by(Interview.id.desc()).limit(limit + 1)
    if agent_id is not None:
        stmt = stmt.where(Interview.agent_id == agent_id)
    if simulation_id is not None:
        stmt = stmt.where(Interview.simulation_id == simulation_id)
    if after is not None:
        stmt = stmt.where(Interview.id < after)
    rows = list(await session.scalars(stmt))
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (rows[-1].id if more else None)


async def remembered_rounds(
    session: AsyncSession, simulation_id: int, agent_id: int, limit: int = MEMORY_ROUNDS
) -> list[RememberedRound]:
    """The agent's decisions in the run's latest `limit` rounds, oldest first, with each
    round's outcome: one primary-key seek per round (agent_history explains why)."""
    rows = await simulation_store.latest_agent_rounds(session, simulation_id, agent_id, limit)
    return [RememberedRound(*row) for row in reversed(rows)]


async def live_address(session: AsyncSession, worker_id: int | None) -> str | None:
    """The address of the worker when it is live, else None."""
    if worker_id is None:
        return None
    return await registry.live_address(session, worker_id)
