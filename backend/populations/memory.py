"""What agents remember, rebuilt from the store when they move to another worker mid-simulation.

Workers keep each agent's own past decisions in the simulation it plays (LLM prompts show them in
{history}). An agent re-placed or restored on a fresh process gets them back from the persisted
decisions of the population's active simulation: the last MEMORY_ROUNDS committed rounds. Only
the LLM policy reads memory, so other policies move agents without it.
"""

from __future__ import annotations

import numpy as np
from sqlalchemy.ext.asyncio import AsyncSession

from backend.simulations import store as simulation_store
from backend.workers.grpc_client import AgentMemory
from worker_server.agents.columns import DEFAULT_MEMORY_SIZE

# What a worker with the default memory size holds: its rounds plus the slot that makes a replay
# of the latest round exact. Workers keep the last rounds they can hold of what they are sent.
MEMORY_ROUNDS = DEFAULT_MEMORY_SIZE + 1


async def load(
    session: AsyncSession, population_id: int, ids: np.ndarray, rounds: int = MEMORY_ROUNDS
) -> AgentMemory | None:
    """The memory of agents `ids` (sorted) in the population's active LLM simulation, if any."""
    simulation = await simulation_store.active_simulation(session, population_id)
    if simulation is None or simulation.current_round == 0:
        return None
    if (simulation.config or {}).get("policy", {}).get("kind") != "llm" or len(ids) == 0:
        return None
    numbers = list(
        range(max(1, simulation.current_round - rounds + 1), simulation.current_round + 1)
    )
    values = np.full((len(ids), len(numbers)), np.nan)
    lo, hi = int(ids[0]), int(ids[-1])
    for j, number in enumerate(numbers):
        rows = await simulation_store.valid_values(session, simulation.id, number, lo, hi)
        if not rows:
            continue
        agent_ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        decided = np.fromiter((r[1] for r in rows), dtype=np.float64, count=len(rows))
        at = np.searchsorted(ids, agent_ids)
        inside = (at < len(ids)) & (ids[np.minimum(at, len(ids) - 1)] == agent_ids)
        values[at[inside], j] = decided[inside]
    await session.commit()
    return AgentMemory(str(simulation.id), numbers, values)
