"""Groups from an attribute (a run's `group_by`): each agent's group is its category's number,
categories numbered in sorted order (an agent without the attribute is in the group named "").
Read once a run from the agents' stored attributes, a page of agents a query."""

from __future__ import annotations

import numpy as np
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import Agent
from backend.populations.store import id_range

READ_PAGE = 100_000


async def attribute_groups(
    session: AsyncSession, population_id: int, size: int, attribute: str
) -> tuple[np.ndarray, list[str]]:
    """(each agent's group by agent number, the groups' labels: its category names)."""
    lo, hi = id_range(population_id)
    category = Agent.attributes[attribute].as_string()
    numbers: list[np.ndarray] = []
    names: list[np.ndarray] = []
    after = lo - 1
    while True:
        rows = (
            await session.execute(
                select(Agent.id, category)
                .where(Agent.id > after, Agent.id < hi)
                .order_by(Agent.id)
                .limit(READ_PAGE)
            )
        ).all()
        if not rows:
            break
        ids, categories = zip(*rows, strict=True)
        numbers.append(np.asarray(ids, dtype=np.int64) - lo)
        names.append(np.asarray(["" if c is None else str(c) for c in categories], dtype=object))
        after = ids[-1]
    if not numbers:
        return np.zeros(size, dtype=np.int64), []
    labels, codes = np.unique(np.concatenate(names).astype(str), return_inverse=True)
    groups = np.zeros(size, dtype=np.int64)
    groups[np.concatenate(numbers)] = codes
    return groups, labels.tolist()
