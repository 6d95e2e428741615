"""One agent's neighbours, a page at a time: who they are and what they did last.

Neighbours come from the population's graph file (the agent's row alone is read and checked);
a complete graph's are every other agent. Each neighbour's `value` is its decision in the latest
stored round of the population's latest simulation (null: no simulation yet, or no valid answer).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import Agent, Population, Simulation, SimulationRound
from backend.populations import graph as population_graph
from backend.populations.store import INDEX_BITS, id_range
from backend.simulations.store import decisions_at
from worker_server.graphs.storage import open_graph

NUMBER_MASK = (1 << INDEX_BITS) - 1


@dataclass
class Neighbour:
    id: int
    number: int
    attributes: dict[str, Any]
    value: float | None


def _row(graph_file, number: int) -> np.ndarray:
    stored = open_graph(graph_file, verify=False)
    return np.asarray(stored.rows(number, number + 1).indices, dtype=np.int64)


async def neighbour_ids(
    session: AsyncSession, population: Population, agent_id: int, after: int | None, limit: int
) -> tuple[list[int], bool]:
    """Up to `limit` neighbour ids above `after` (ascending), and whether more follow."""
    record = population.graph or {}
    if not record:
        return [], False
    number = agent_id & NUMBER_MASK
    base = population.id << INDEX_BITS
    if record.get("kind") == "complete":
        lo, hi = id_range(population.id)
        start = max(lo, (after + 1) if after is not None else lo)
        rows = await session.scalars(
            select(Agent.id)
            .where(Agent.id >= start, Agent.id < hi, Agent.id != agent_id)
            .order_by(Agent.id)
            .limit(limit + 1)
        )
        ids = list(rows)
        return ids[:limit], len(ids) > limit
    graph_file = population_graph.file_of(population)
    if graph_file is None:
        return [], False
    numbers = await asyncio.to_thread(_row, graph_file, number)
    ids = base | numbers
    if after is not None:
        ids = ids[ids > after]
    return ids[:limit].tolist(), len(ids) > limit


async def latest_values(
    session: AsyncSession, population_id: int, ids: list[int]
) -> dict[int, float | None]:
    """Each agent's value in the latest stored round of the population's latest simulation."""
    simulation_id = await session.scalar(
        select(func.max(Simulation.id)).where(Simulation.population_id == population_id)
    )
    if simulation_id is None or not ids:
        return {}
    last_round = await session.scalar(
        select(func.max(SimulationRound.round)).where(
            SimulationRound.simulation_id == simulation_id
        )
    )
    if last_round is None:
        return {}
    found = await decisions_at(session, simulation_id, ids, [last_round])
    return {agent: value for (agent, _), (value, _) in found.items()}


async def neighbours_page(
    session: AsyncSession, population: Population, agent_id: int, after: int | None, limit: int
) -> tuple[list[Neighbour], int | None]:
    ids, more = await neighbour_ids(session, population, agent_id, after, limit)
    if not ids:
        return [], None
    rows = await session.execute(select(Agent.id, Agent.attributes).where(Agent.id.in_(ids)))
    attributes = dict(rows.tuples().all())
    values = await latest_values(session, population.id, ids)
    items = [Neighbour(i, i & NUMBER_MASK, attributes.get(i) or {}, values.get(i)) for i in ids]
    return items, (ids[-1] if more else None)
