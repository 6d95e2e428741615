"""Runs that store only what changed: which decisions a round writes, and every agent's decision
per round carried forward for the readers.

A network simulation's agents keep their value from round to round, and at 10^6 agents most of
them keep it in most rounds (an epidemic touches a few percent of the agents a round). Such a
run (simulations.stores_changes) writes per round only the decisions that differ from the
agent's decision in the round before; round 1 writes every agent's. The rule every reader
follows: **an agent without a row in round r made the same decision as in its latest round
before r** (value and status; such runs keep no raw answers). This module owns that rule: the
writer's mask, and the reading of a round's full decisions (export, resume, the decisions
browser, agents' histories) from the rows kept.

Reads go round by round through the primary key (simulation, round, agent): a seek per round and
a range of agents, never a scan of the other rounds' rows.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from itertools import repeat

import numpy as np
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import SimulationRound
from backend.simulations.outcome import DecisionTable
from populace.plugin import STATUS_NAMES, RoundActions

# Rows read per query while carrying a round forward.
READ_PAGE = 20_000
_CODES = {name: code for code, name in enumerate(STATUS_NAMES)}
# Every agent id (ids are positive: backend.populations.store.id_range).
_ALL_AGENTS = (0, 2**63 - 1)


def keeps_changes_only(network: bool, store_responses: bool) -> bool:
    """Whether a run stores only what changed: a network simulation (its agents keep their
    value) that keeps no raw answers (an answer is new every round, so every row would be)."""
    return network and not store_responses


def changed(
    table: DecisionTable, last_values: np.ndarray, last_status: np.ndarray, numbers: np.ndarray
) -> np.ndarray:
    """The rows of a round's decisions that differ from the same agents' decisions the round
    before (`last_*` by agent number; `numbers` the table's agents' numbers). NaN is the value
    of every decision that is not valid, so two of them are equal when their statuses are."""
    old = last_values[numbers]
    same_value = (table.values == old) | (np.isnan(table.values) & np.isnan(old))
    return ~(same_value & (table.status == last_status[numbers]))


@dataclass
class CarriedRound:
    """Every agent's decision after a round: agent ids sorted, NaN for no value, status codes."""

    agent_ids: np.ndarray
    values: np.ndarray
    status: np.ndarray
    round: int = 0

    @classmethod
    def empty(cls) -> CarriedRound:
        return cls(np.empty(0, np.int64), np.empty(0), np.empty(0, np.uint8))

    def take(self, ids: np.ndarray, values: np.ndarray, status: np.ndarray) -> None:
        """Overwrite the decisions of the rows kept for the next round (ids sorted)."""
        if not len(ids):
            return
        n = len(self.agent_ids)
        at = np.searchsorted(self.agent_ids, ids)
        if n:
            known = (at < n) & (self.agent_ids[np.minimum(at, n - 1)] == ids)
        else:
            known = np.zeros(len(ids), dtype=bool)
        if np.all(known):
            self.values[at], self.status[at] = values, status
            return
        # Agents not seen before (round 1 has every agent, so only ever then): merged in.
        self.values[at[known]], self.status[at[known]] = values[known], status[known]
        new = ~known
        merged_ids = np.concatenate([self.agent_ids, ids[new]])
        order = np.argsort(merged_ids, kind="stable")
        self.agent_ids = merged_ids[order]
        self.values = np.concatenate([self.values, values[new]])[order]
        self.status = np.concatenate([self.status, status[new]])[order]

    def actions(self) -> RoundActions:
        return RoundActions(self.round, self.agent_ids, self.values, self.status)

    def rows(self, start: int = 0, stop: int | None = None) -> list[tuple]:
        """(round, agent_id, value, status, response) tuples, as the store's pages give them."""
        values = self.values[start:stop].tolist()
        return list(
            zip(
                repeat(self.round),
                self.agent_ids[start:stop].tolist(),
                (None if v != v else v for v in values),
                (STATUS_NAMES[s] for s in self.status[start:stop].tolist()),
                repeat(None),
            )
        )


def columns(rows: Iterable[tuple]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(agent ids, values with NaN for None, status codes) of (agent_id, value, status) rows."""
    rows = list(rows)
    n = len(rows)
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=n)
    values = np.fromiter((np.nan if r[1] is None else r[1] for r in rows), np.float64, count=n)
    status = np.fromiter((_CODES[r[2]] for r in rows), dtype=np.uint8, count=n)
    return ids, values, status


_ROUND_SQL = (
    "SELECT agent_id, value, status FROM decisions WHERE simulation_id = {0} AND round = {1} "
    "AND agent_id > {2} AND agent_id <= {3} ORDER BY agent_id LIMIT {4}"
)


async def _kept_rows(
    session: AsyncSession, simulation_id: int, round_number: int, after: int, last: int
) -> list[tuple]:
    conn = await session.connection()
    params = (simulation_id, round_number, after, last, READ_PAGE)
    if conn.dialect.name == "postgresql":
        raw = await conn.get_raw_connection()
        sql = _ROUND_SQL.format("$1", "$2", "$3", "$4", "$5")
        return await raw.driver_connection.fetch(sql, *params)
    result = await conn.exec_driver_sql(_ROUND_SQL.format("?", "?", "?", "?", "?"), params)
    return result.all()


async def kept_round_numbers(session: AsyncSession, simulation_id: int, upto: int) -> list[int]:
    return list(
        await session.scalars(
            select(SimulationRound.round)
            .where(SimulationRound.simulation_id == simulation_id, SimulationRound.round <= upto)
            .order_by(SimulationRound.round)
        )
    )


async def apply_round(
    session: AsyncSession,
    state: CarriedRound,
    simulation_id: int,
    round_number: int,
    agents: tuple[int, int] = _ALL_AGENTS,
) -> None:
    """Carry `state` into `round_number`: its kept rows for agents first..last (inclusive)."""
    first, last = agents
    after = first - 1
    while True:
        rows = await _kept_rows(session, simulation_id, round_number, after, last)
        if rows:
            state.take(*columns(rows))
        if len(rows) < READ_PAGE:
            break
        after = rows[-1][0]
    state.round = round_number


async def carried_rounds(
    session: AsyncSession,
    simulation_id: int,
    upto: int,
    agents: tuple[int, int] = _ALL_AGENTS,
) -> AsyncIterator[CarriedRound]:
    """Every kept round up to `upto`, oldest first, each as every agent's decision (one state,
    updated in place: take what is needed before the next)."""
    state = CarriedRound.empty()
    for number in await kept_round_numbers(session, simulation_id, upto):
        await apply_round(session, state, simulation_id, number, agents)
        yield state


async def carried_round(
    session: AsyncSession,
    simulation_id: int,
    round_number: int,
    agents: tuple[int, int] = _ALL_AGENTS,
) -> CarriedRound:
    """Every agent's decision (of agents first..last) in one kept round."""
    state = CarriedRound.empty()
    for number in await kept_round_numbers(session, simulation_id, round_number):
        await apply_round(session, state, simulation_id, number, agents)
    return state


def fill_gaps(rows: list[list], value_at: int, status_at: int, carried: tuple | None) -> None:
    """Rows of one agent in round order (lists, changed in place) whose decision is None where
    the round kept no row: each takes the decision before it; `carried` is the (value, status)
    before the first row (None when the first row has its own)."""
    last = carried
    for row in rows:
        if row[status_at] is None:
            if last is not None:
                row[value_at], row[status_at] = last
        else:
            last = (row[value_at], row[status_at])
