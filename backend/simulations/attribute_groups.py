"""Groups from an attribute (a run's `group_by`): each agent's group is its category's number,
categories numbered in sorted order (an agent without the attribute is in the group named "").
Read once a run from the agents' stored attributes."""

from __future__ import annotations

import numpy as np
from sqlalchemy.ext.asyncio import AsyncSession

from backend.populations.store import agent_attribute


async def attribute_groups(
    session: AsyncSession, population_id: int, size: int, attribute: str
) -> tuple[np.ndarray, list[str]]:
    """(each agent's group by agent number, the groups' labels: its category names)."""
    numbers, values = await agent_attribute(session, population_id, attribute)
    labels, codes = np.unique(values, return_inverse=True)
    groups = np.zeros(size, dtype=np.int64)
    groups[numbers] = codes
    return groups, labels.tolist()
