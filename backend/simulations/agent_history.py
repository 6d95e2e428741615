"""One agent's decisions across the simulations of its population, a keyset page at a time.

The decisions table is keyed by (simulation, round, agent) and has no index on the agent alone
(an index per agent would slow the bulk writes of every round). An agent's id names its
population, though, and a population's simulations and their rounds are few: the query walks
those rounds and looks the agent's decision up in each by the full primary key, one seek per
round, whatever the size of the population.

Order: newest simulation first, rounds in order within it. The cursor is "simulation:round" of
the last row of the previous page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import INT32_MAX
from backend.lifecycles import decision
from backend.populations.store import population_of
from backend.simulations import store as simulation_store
from backend.simulations.export_values import NUMBER, value_type

_CURSOR = re.compile(r"^(\d{1,10}):(\d{1,10})$")


class BadCursor(ValueError):
    pass


@dataclass(frozen=True)
class Cursor:
    simulation_id: int
    round: int

    def __str__(self) -> str:
        return f"{self.simulation_id}:{self.round}"

    @classmethod
    def parse(cls, text: str) -> Cursor:
        match = _CURSOR.match(text)
        # Both are int32 columns: a larger number would fail in the database.
        if match is None or max(int(match.group(1)), int(match.group(2))) > INT32_MAX:
            raise BadCursor(
                f"expected 'simulation:round' as given in next_after, got {text[:40]!r}"
            )
        return cls(int(match.group(1)), int(match.group(2)))


@dataclass(frozen=True)
class AgentDecisionRow:
    simulation_id: int
    simulation_name: str
    simulation_status: str
    round: int
    value: float | None
    status: str
    target: float | None
    winner_value: float | None
    # The value in its plugin's action type (a number, a whole number, an option's name, true
    # or false), as exports write it; None unless valid.
    action: float | int | str | bool | None = None

    @property
    def won(self) -> bool:
        # The winning value is one of the values chosen, so equality is exact.
        return (
            self.status == decision.VALID
            and self.value is not None
            and self.value == self.winner_value
        )


async def agent_decisions(
    session: AsyncSession,
    agent_id: int,
    *,
    simulation_id: int | None = None,
    after: Cursor | None = None,
    limit: int = 50,
) -> tuple[list[AgentDecisionRow], Cursor | None]:
    """A page of the agent's decisions and the cursor of the next page (None on the last)."""
    rows, next_after = await simulation_store.agent_history_page(
        session,
        agent_id,
        population_of(agent_id),
        simulation_id=simulation_id,
        after=(after.simulation_id, after.round) if after is not None else None,
        limit=limit,
    )
    configs = await simulation_store.configs_of(session, sorted({row[0] for row in rows}))
    types = {sid: value_type(config) for sid, config in configs.items()}
    out = [AgentDecisionRow(*row, action=types.get(row[0], NUMBER).json(row[4])) for row in rows]
    return out, (Cursor(*next_after) if next_after is not None else None)
