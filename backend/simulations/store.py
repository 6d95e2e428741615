"""The simulation store: runs, their rounds, and every decision, written in bulk.

A round's statistics row, its decision rows and the simulation's progress are written in one
transaction (COPY on Postgres, batched executemany on SQLite), so a round is kept whole or not
at all. Decisions are read back in keyset pages of their primary key (round, agent id), which is
the export order.

Every function takes an AsyncSession and commits its own writes, like the population store.
On PostgreSQL each simulation's decisions are a partition of their own (alembic 0008), made in
create_simulation and dropped in delete_simulation.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from itertools import groupby, islice, repeat
from typing import Any

import numpy as np
from sqlalchemy import (
    ColumnElement,
    and_,
    case,
    delete,
    func,
    insert,
    literal,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.db.models import Agent, Decision, Simulation, SimulationRound
from backend.db.times import utcnow
from backend.errors import Conflict, NotFound
from backend.lifecycles import decision
from backend.lifecycles import simulation as lifecycle
from backend.simulations import carried, group_store, pgcopy, timeline
from backend.simulations.outcome import STATUS_NAMES, DecisionTable, RoundOutcome
from backend.simulations.validity import DEFAULT_PARTICIPATION_FLOOR, participation
from populace.plugin import VALID, RoundActions

DECISION_COLUMNS = pgcopy.COLUMNS
_SQLITE_INSERT = (
    f"INSERT INTO decisions ({', '.join(DECISION_COLUMNS)}) "
    f"VALUES ({', '.join('?' * len(DECISION_COLUMNS))})"
)
SQLITE_BATCH = 10_000
EXPORT_PAGE = 10_000


class UnknownSimulation(NotFound):
    what = "simulation"


class PopulationBusy(Exception):
    """The population already has a pending or running simulation."""


class SimulationActive(Conflict):
    """The simulation is not finished (pending, running or paused)."""

    def __init__(self, simulation_id: int, status: str) -> None:
        super().__init__(f"simulation {simulation_id} is {status}: cancel it first")
        self.status = status


def _dialect(session: AsyncSession) -> str:
    return session.get_bind().dialect.name


# --- simulations ---------------------------------------------------------------------------


async def create_simulation(
    session: AsyncSession,
    *,
    population_id: int,
    name: str,
    rounds: int,
    config: dict[str, Any],
    seed: int,
    models: list[str],
    version: str,
    record: dict[str, Any] | None = None,
    sweep_id: int | None = None,
    sweep_params: dict[str, Any] | None = None,
    stores_changes: bool = False,
) -> Simulation:
    """A pending simulation. Raises PopulationBusy when the population has an active one (the
    database's partial unique index decides, so two concurrent creates cannot both win)."""
    simulation = Simulation(
        population_id=population_id,
        name=name,
        status=lifecycle.PENDING,
        rounds=rounds,
        current_round=0,
        config=config,
        seed=seed,
        models=models,
        version=version,
        error=None,
        stop_reason=None,
        prompt_tokens=0,
        cached_prompt_tokens=0,
        completion_tokens=0,
        record=record or {},
        sweep_id=sweep_id,
        sweep_params=sweep_params,
        stores_changes=stores_changes,
        participation_floor=config.get("participation_floor", DEFAULT_PARTICIPATION_FLOOR),
        created_at=utcnow(),
    )
    session.add(simulation)
    try:
        await session.flush()
    except IntegrityError:
        await session.rollback()
        raise PopulationBusy(population_id) from None
    if _dialect(session) == "postgresql":
        # Its decisions' own partition, made with it (alembic 0008).
        partition = decisions_partition(simulation.id)
        await session.execute(
            text(
                f"CREATE TABLE {partition} PARTITION OF decisions "
                f"FOR VALUES IN ({int(simulation.id)})"
            )
        )
    await timeline.record_status(session, simulation)
    await session.commit()
    return simulation


def decisions_partition(simulation_id: int) -> str:
    """PostgreSQL: the table holding one simulation's decisions, a partition of `decisions`
    (LIST on simulation_id), created and dropped with the simulation."""
    return f"decisions_{int(simulation_id)}"


async def delete_simulation(session: AsyncSession, simulation_id: int) -> None:
    """A finished simulation, its rounds and its decisions, in one transaction: on PostgreSQL
    its decisions go with their partition (a DROP TABLE, whatever their number). Raises
    UnknownSimulation, or SimulationActive when it is not finished (a resume cannot win a
    race with it: the conditional DELETE goes first)."""
    deleted = await session.scalar(
        delete(Simulation)
        .where(Simulation.id == simulation_id, Simulation.status.in_(lifecycle.FINAL))
        .returning(Simulation.id)
    )
    if deleted is None:
        await session.rollback()
        simulation = await get_simulation(session, simulation_id)  # UnknownSimulation
        raise SimulationActive(simulation_id, simulation.status)
    await session.execute(
        delete(SimulationRound).where(SimulationRound.simulation_id == simulation_id)
    )
    await group_store.delete_all(session, simulation_id)
    await timeline.delete_entries(session, simulation_id)
    if _dialect(session) == "postgresql":
        await session.execute(text(f"DROP TABLE IF EXISTS {decisions_partition(simulation_id)}"))
    else:
        await session.execute(delete(Decision).where(Decision.simulation_id == simulation_id))
    await session.commit()


async def configs_of(session: AsyncSession, simulation_ids: list[int]) -> dict[int, dict]:
    """{id: stored config} of these simulations (one query)."""
    rows = await session.execute(
        select(Simulation.id, Simulation.config).where(Simulation.id.in_(simulation_ids))
    )
    return {sid: config or {} for sid, config in rows.all()}


async def get_simulation(session: AsyncSession, simulation_id: int) -> Simulation:
    simulation = await session.get(Simulation, simulation_id, populate_existing=True)
    if simulation is None:
        raise UnknownSimulation(simulation_id)
    return simulation


async def active_simulation(session: AsyncSession, population_id: int) -> Simulation | None:
    """The population's pending or running simulation, if any."""
    return await session.scalar(
        select(Simulation).where(
            Simulation.population_id == population_id,
            Simulation.status.in_(lifecycle.ACTIVE),
        )
    )


async def active_simulations(session: AsyncSession) -> list[Simulation]:
    return list(
        await session.scalars(select(Simulation).where(Simulation.status.in_(lifecycle.ACTIVE)))
    )


async def set_status(
    session: AsyncSession,
    simulation_id: int,
    status: str,
    *,
    error: str | None = None,
    stop_reason: str | None = None,
    pause_reason: str | None = None,
    only_if_active: bool = True,
) -> Simulation | None:
    """Move an active simulation to status (None when it was no longer active: a finished run
    is left only by `reactivate`). The table in backend.lifecycles.simulation says from which
    statuses; only_if_active=False lifts the active condition, not the table's."""
    values: dict[str, Any] = {"status": status}
    now = utcnow()
    if status == lifecycle.RUNNING:
        values["started_at"] = func.coalesce(Simulation.started_at, now)
    if status != lifecycle.PAUSED:
        values["pause_reason"] = None
    if pause_reason is not None:
        values["pause_reason"] = pause_reason
    if lifecycle.is_final(status):
        values["finished_at"] = now
    if error is not None:
        values["error"] = error
    if stop_reason is not None:
        values["stop_reason"] = stop_reason
    among = lifecycle.ACTIVE if only_if_active else None
    stmt = update(Simulation).where(
        Simulation.id == simulation_id,
        Simulation.status.in_(lifecycle.MACHINE.sources(status, among=among)),
    )
    stmt = (
        stmt.values(**values)
        .returning(Simulation)
        .execution_options(synchronize_session=False, populate_existing=True)
    )
    simulation = (await session.execute(stmt)).scalar_one_or_none()
    if simulation is not None:
        await timeline.record_status(session, simulation)
    await session.commit()
    return simulation


async def reactivate(
    session: AsyncSession, simulation_id: int, *, config: dict[str, Any] | None = None
) -> Simulation | None:
    """A paused or failed simulation goes back to running (to resume after its last committed
    round), with its stored config replaced when given; None when it is in neither status. Raises PopulationBusy when its population has
    another active simulation (the partial unique index decides)."""
    stmt = (
        update(Simulation)
        .where(
            Simulation.id == simulation_id,
            Simulation.status.in_(
                lifecycle.MACHINE.sources(lifecycle.RUNNING, among=lifecycle.RESUMABLE)
            ),
        )
        .values(
            status=lifecycle.RUNNING,
            error=None,
            pause_reason=None,
            finished_at=None,
            **({"config": config} if config is not None else {}),
        )
        .returning(Simulation)
        .execution_options(synchronize_session=False, populate_existing=True)
    )
    try:
        simulation = (await session.execute(stmt)).scalar_one_or_none()
        if simulation is not None:
            await timeline.record_status(session, simulation)
        await session.commit()
    except IntegrityError:
        await session.rollback()
        raise PopulationBusy(simulation_id) from None
    return simulation


async def count_by_status(session: AsyncSession) -> dict[str, int]:
    """{status: simulations in it} (for the metrics scrape)."""
    stmt = select(Simulation.status, func.count()).group_by(Simulation.status)
    return {status: n for status, n in await session.execute(stmt)}


async def sweep_runs(session: AsyncSession, sweep_id: int) -> list[Simulation]:
    """A sweep's simulations, oldest first (at most its MAX_RUNS: read whole)."""
    return list(
        await session.scalars(
            select(Simulation).where(Simulation.sweep_id == sweep_id).order_by(Simulation.id)
        )
    )


# --- rounds --------------------------------------------------------------------------------


def _decision_records(simulation_id: int, round_number: int, table: DecisionTable) -> list:
    """Plain tuples for COPY / executemany, one per decision, in agent id order (built in a
    thread by the callers: a million tuples is a good part of a second)."""
    values = table.values.tolist()
    status = [STATUS_NAMES[s] for s in table.status.tolist()]
    responses = table.responses if table.responses is not None else repeat(None)
    return list(
        zip(
            repeat(simulation_id),
            repeat(round_number),
            table.agent_ids.tolist(),
            # NaN marks "no value" in memory; the row has NULL.
            (None if v != v else v for v in values),
            status,
            responses,
        )
    )


async def _copy_decisions(conn, simulation_id: int, round_number: int, table: DecisionTable):
    """COPY into decisions: binary data that numpy encodes in a thread, so the event loop only
    sends bytes; decisions with raw answers (text of any length) as records."""
    driver = (await conn.get_raw_connection()).driver_connection
    if table.responses is None:
        chunks = await asyncio.to_thread(pgcopy.encode, simulation_id, round_number, table)
        await driver.copy_to_table(
            "decisions", source=_aiter(chunks), columns=pgcopy.COLUMNS, format="binary"
        )
        return
    records = await asyncio.to_thread(_decision_records, simulation_id, round_number, table)
    await driver.copy_records_to_table("decisions", records=records, columns=DECISION_COLUMNS)


async def _aiter(chunks: list[memoryview]) -> AsyncIterator[memoryview]:
    for chunk in chunks:
        yield chunk


async def save_round(
    session: AsyncSession, simulation_id: int, result: RoundOutcome, table: DecisionTable
) -> None:
    """The round's row, its decisions, the simulation's progress and the round's timeline
    entries: all or nothing (on any error the caller's session closes without a commit, which
    rolls everything back).

    Idempotent: a round already kept (a retry after a commit whose answer was lost) is left as
    it is, so decisions stay unique per (simulation, round, agent)."""
    kept = await session.scalar(
        select(SimulationRound.round).where(
            SimulationRound.simulation_id == simulation_id, SimulationRound.round == result.round
        )
    )
    if kept is not None:
        await session.rollback()
        return
    round_row = {
        **result.stats(),
        "simulation_id": simulation_id,
        "decisions_stored": len(table),
        "finished_at": utcnow(),
    }
    await session.execute(insert(SimulationRound).values(**round_row))
    await group_store.save(session, simulation_id, result.round, result.group_metrics)
    conn = await session.connection()
    if _dialect(session) == "postgresql":
        await _copy_decisions(conn, simulation_id, result.round, table)
    else:
        records = await asyncio.to_thread(_decision_records, simulation_id, result.round, table)
        rows = iter(records)
        while batch := list(islice(rows, SQLITE_BATCH)):
            await conn.exec_driver_sql(_SQLITE_INSERT, batch)
    rounds = await session.scalar(
        update(Simulation)
        .where(Simulation.id == simulation_id)
        .values(
            current_round=result.round,
            lost_agents=Simulation.lost_agents + result.n_lost,
            rounds_below_floor=Simulation.rounds_below_floor
            + _below_floor(result.n_valid, result.n_invalid, result.n_late, result.n_lost),
            prompt_tokens=Simulation.prompt_tokens + result.prompt_tokens,
            cached_prompt_tokens=Simulation.cached_prompt_tokens + result.cached_prompt_tokens,
            completion_tokens=Simulation.completion_tokens + result.completion_tokens,
        )
        .returning(Simulation.rounds)
        .execution_options(synchronize_session=False)
    )
    timeline.add_entries(session, timeline.round_entries(simulation_id, rounds, result, utcnow()))
    await session.commit()


def _below_floor(n_valid: int, n_invalid: int, n_late: int, n_lost: int):
    """1 when the round's participation is below the run's floor (the run's own column), else 0:
    counted in the same UPDATE that keeps the round."""
    share = participation(n_valid, n_invalid, n_late, n_lost)
    if share is None:
        return 0
    return case((Simulation.participation_floor > share, 1), else_=0)


async def stores_changes(session: AsyncSession, simulation_id: int) -> bool:
    """Whether the run keeps only the decisions that changed (backend.simulations.carried)."""
    kept = await session.scalar(
        select(Simulation.stores_changes).where(Simulation.id == simulation_id)
    )
    return bool(kept)


async def list_rounds(
    session: AsyncSession, simulation_id: int, *, after: int | None = None, limit: int = 1000
) -> tuple[list[SimulationRound], int | None]:
    stmt = (
        select(SimulationRound)
        .where(SimulationRound.simulation_id == simulation_id)
        .order_by(SimulationRound.round)
        .limit(limit + 1)
    )
    if after is not None:
        stmt = stmt.where(SimulationRound.round > after)
    rows = list(await session.scalars(stmt))
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (rows[-1].round if more else None)


async def all_rounds(session: AsyncSession, simulation_id: int) -> list[SimulationRound]:
    """Every kept round of the run, in round order (at most MAX_ROUNDS)."""
    stmt = (
        select(SimulationRound)
        .where(SimulationRound.simulation_id == simulation_id)
        .order_by(SimulationRound.round)
    )
    return list(await session.scalars(stmt))


async def last_rounds(
    session: AsyncSession, simulation_ids: list[int]
) -> dict[int, SimulationRound]:
    """Each simulation's last kept round, by simulation id (none for a run without rounds)."""
    if not simulation_ids:
        return {}
    last = (
        select(SimulationRound.simulation_id, func.max(SimulationRound.round).label("round"))
        .where(SimulationRound.simulation_id.in_(simulation_ids))
        .group_by(SimulationRound.simulation_id)
        .subquery()
    )
    rows = await session.scalars(
        select(SimulationRound).join(
            last,
            and_(
                SimulationRound.simulation_id == last.c.simulation_id,
                SimulationRound.round == last.c.round,
            ),
        )
    )
    return {r.simulation_id: r for r in rows}


def agent_decisions_join(agent_id: int) -> ColumnElement[bool]:
    """Join a run's rounds to one agent's decisions: a primary-key seek per round, no scan of
    the round's other agents (agent_history explains why)."""
    return and_(
        Decision.simulation_id == SimulationRound.simulation_id,
        Decision.round == SimulationRound.round,
        Decision.agent_id == agent_id,
    )


# (agent_id, round, value, status, response): a decision as transcripts read it.
DecisionTuple = tuple[int, int, float | None, str, str | None]


async def round_decisions_page(
    session: AsyncSession,
    simulation_id: int,
    round_number: int,
    *,
    status: str | None = None,
    agent_where: ColumnElement[bool] | None = None,
    value_min: float | None = None,
    value_max: float | None = None,
    after: int | None = None,
    limit: int = 50,
) -> tuple[list[DecisionTuple], int | None]:
    """A keyset page (by agent id) of one round's decisions, filtered, and the agent id to ask
    after for the next (None on the last). `agent_where` is a condition on the decision's
    agent row (population_store.attribute_equals): the agents table is joined for it."""
    if await stores_changes(session, simulation_id):
        return await _carried_round_page(
            session,
            simulation_id,
            round_number,
            status=status,
            agent_where=agent_where,
            value_min=value_min,
            value_max=value_max,
            after=after,
            limit=limit,
        )
    stmt = (
        select(
            Decision.agent_id, Decision.round, Decision.value, Decision.status, Decision.response
        )
        .where(Decision.simulation_id == simulation_id, Decision.round == round_number)
        .order_by(Decision.agent_id)
        .limit(limit + 1)
    )
    if after is not None:
        stmt = stmt.where(Decision.agent_id > after)
    if status is not None:
        stmt = stmt.where(Decision.status == status)
    if value_min is not None:
        stmt = stmt.where(Decision.value >= value_min)
    if value_max is not None:
        stmt = stmt.where(Decision.value <= value_max)
    if agent_where is not None:
        stmt = stmt.join(Agent, Agent.id == Decision.agent_id).where(agent_where)
    decisions = [tuple(r) for r in await session.execute(stmt)]
    more = len(decisions) > limit
    decisions = decisions[:limit]
    return decisions, (decisions[-1][0] if more else None)


# Agents read at a time while a filtered page of a carried round fills up.
_CARRIED_CHUNK = 500


async def _carried_round_page(
    session: AsyncSession,
    simulation_id: int,
    round_number: int,
    *,
    status: str | None,
    agent_where: ColumnElement[bool] | None,
    value_min: float | None,
    value_max: float | None,
    after: int | None,
    limit: int,
) -> tuple[list[DecisionTuple], int | None]:
    """round_decisions_page for a run that stores changes: round 1's rows name every agent (in
    id order, a chunk at a time); each agent's decision is its latest kept row up to the round
    (carried.py), filtered after it is carried."""
    if round_number not in await carried.kept_round_numbers(session, simulation_id, round_number):
        return [], None
    page: list[DecisionTuple] = []
    cursor = after
    while len(page) <= limit:
        roster = select(Decision.agent_id).where(
            Decision.simulation_id == simulation_id, Decision.round == 1
        )
        if cursor is not None:
            roster = roster.where(Decision.agent_id > cursor)
        if agent_where is not None:
            roster = roster.join(Agent, Agent.id == Decision.agent_id).where(agent_where)
        agents = list(
            await session.scalars(roster.order_by(Decision.agent_id).limit(_CARRIED_CHUNK))
        )
        if not agents:
            break
        latest = await _latest_decisions(session, simulation_id, agents, round_number)
        for agent in agents:
            value, decided = latest[agent]
            if status is not None and decided != status:
                continue
            if value_min is not None and (value is None or value < value_min):
                continue
            if value_max is not None and (value is None or value > value_max):
                continue
            page.append((agent, round_number, value, decided, None))
        cursor = agents[-1]
    more = len(page) > limit
    page = page[:limit]
    return page, (page[-1][0] if more else None)


async def _latest_decisions(
    session: AsyncSession, simulation_id: int, agent_ids: list[int], round_number: int
) -> dict[int, tuple[float | None, str]]:
    """Each agent's (value, status) in a round of a run that stores changes: its latest kept
    row up to the round, found by a primary-key seek per round and agent."""
    rows = await session.execute(
        select(Decision.agent_id, Decision.round, Decision.value, Decision.status)
        .select_from(SimulationRound)
        .join(
            Decision,
            and_(
                Decision.simulation_id == SimulationRound.simulation_id,
                Decision.round == SimulationRound.round,
                Decision.agent_id.in_(agent_ids),
            ),
        )
        .where(
            SimulationRound.simulation_id == simulation_id,
            SimulationRound.round <= round_number,
        )
        .order_by(Decision.round)
    )
    return {agent: (value, decided) for agent, _round, value, decided in rows}


async def agent_decisions_page(
    session: AsyncSession,
    simulation_id: int,
    agent_id: int,
    *,
    after: int | None = None,
    limit: int = 50,
) -> tuple[list[DecisionTuple], int | None]:
    """A keyset page (by round) of one agent's decisions in one simulation, and the round to
    ask after for the next (None on the last)."""
    # Round by round through the rounds table, each decision found by the full primary key:
    # no scan of the simulation's other agents (as in agent_history_page).
    carry = await stores_changes(session, simulation_id)
    stmt = (
        select(
            literal(agent_id),
            SimulationRound.round,
            Decision.value,
            Decision.status,
            Decision.response,
        )
        .select_from(SimulationRound)
        .join(Decision, agent_decisions_join(agent_id), isouter=carry)
        .where(SimulationRound.simulation_id == simulation_id)
        .order_by(SimulationRound.round)
        .limit(limit + 1)
    )
    if after is not None:
        stmt = stmt.where(SimulationRound.round > after)
    decisions = [list(r) for r in await session.execute(stmt)]
    if carry:
        await _fill_carried(session, simulation_id, agent_id, decisions, round_at=1, value_at=2)
    decisions = [tuple(d) for d in decisions]
    more = len(decisions) > limit
    decisions = decisions[:limit]
    return decisions, (decisions[-1][1] if more else None)


async def _fill_carried(
    session: AsyncSession,
    simulation_id: int,
    agent_id: int,
    rows: list[list],
    *,
    round_at: int,
    value_at: int,
) -> None:
    """One agent's rows of a run that stores changes, in round order (lists, filled in place):
    a round that kept no row for the agent takes its decision before (carried.fill_gaps); the
    decision before the first row is read when that row has none."""
    if not rows:
        return
    before = None
    if rows[0][value_at + 1] is None and rows[0][round_at] > 1:
        latest = await _latest_decisions(session, simulation_id, [agent_id], rows[0][round_at] - 1)
        before = latest.get(agent_id)
    carried.fill_gaps(rows, value_at, value_at + 1, before)


async def agent_history_page(
    session: AsyncSession,
    agent_id: int,
    population_id: int,
    *,
    simulation_id: int | None = None,
    after: tuple[int, int] | None = None,
    limit: int = 50,
) -> tuple[list[tuple], tuple[int, int] | None]:
    """A keyset page of one agent's decisions across its population's simulations, as rows
    (simulation id, name, status, round, value, decision status, target, winner value):
    newest simulation first, rounds in order, after the (simulation, round) `after`; and the
    (simulation, round) to ask after for the next (None on the last).
    backend.simulations.agent_history explains the walk."""
    stmt = (
        select(
            Simulation.id,
            Simulation.name,
            Simulation.status,
            SimulationRound.round,
            Decision.value,
            Decision.status,
            SimulationRound.target,
            SimulationRound.winner_value,
        )
        .select_from(Simulation)
        .join(SimulationRound, SimulationRound.simulation_id == Simulation.id)
        # A run that stores changes has no row for a round the agent kept its decision in.
        .join(Decision, agent_decisions_join(agent_id), isouter=True)
        .where(
            Simulation.population_id == population_id,
            or_(Decision.status.is_not(None), Simulation.stores_changes),
        )
        .order_by(Simulation.id.desc(), SimulationRound.round)
        .limit(limit + 1)
    )
    if simulation_id is not None:
        stmt = stmt.where(Simulation.id == simulation_id)
    if after is not None:
        after_simulation, after_round = after
        stmt = stmt.where(
            or_(
                Simulation.id < after_simulation,
                and_(Simulation.id == after_simulation, SimulationRound.round > after_round),
            )
        )
    rows = [list(row) for row in await session.execute(stmt)]
    for simulation, runs in groupby(rows, key=lambda row: row[0]):
        await _fill_carried(session, simulation, agent_id, list(runs), round_at=3, value_at=4)
    rows = [tuple(row) for row in rows]
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, ((rows[-1][0], rows[-1][3]) if more else None)


async def latest_agent_rounds(
    session: AsyncSession, simulation_id: int, agent_id: int, limit: int
) -> list[tuple[int, float | None, str, float | None, float | None]]:
    """(round, value, status, target, winner value) of the agent's decisions in the run's
    latest `limit` rounds, newest first: one primary-key seek per round."""
    stmt = (
        select(
            SimulationRound.round,
            Decision.value,
            Decision.status,
            SimulationRound.target,
            SimulationRound.winner_value,
        )
        .join(Decision, agent_decisions_join(agent_id), isouter=True)
        .where(SimulationRound.simulation_id == simulation_id)
        .order_by(SimulationRound.round.desc())
        .limit(limit)
    )
    rows = [list(row) for row in await session.execute(stmt)]
    if await stores_changes(session, simulation_id):
        oldest_first = rows[::-1]
        await _fill_carried(session, simulation_id, agent_id, oldest_first, round_at=0, value_at=1)
    return [tuple(row) for row in rows if row[2] is not None]


async def told_outcomes(
    session: AsyncSession, simulation_id: int, before_round: int
) -> list[tuple[int, float, float | None]]:
    """(round, winner, mean) of the rounds before `before_round` that had a winner, oldest
    first: what the agents were told."""
    stmt = (
        select(SimulationRound.round, SimulationRound.winner_value, SimulationRound.mean)
        .where(
            SimulationRound.simulation_id == simulation_id,
            SimulationRound.round < before_round,
            SimulationRound.winner_value.is_not(None),
        )
        .order_by(SimulationRound.round)
    )
    return [(r, w, m) for r, w, m in await session.execute(stmt)]


async def decisions_at(
    session: AsyncSession, simulation_id: int, agent_ids: list[int], rounds: list[int]
) -> dict[tuple[int, int], tuple[float | None, str]]:
    """{(agent, round): (value, status)}, looked up by the full primary key (one seek per
    agent and round, whatever the size of the round)."""
    if not agent_ids or not rounds:
        return {}
    if await stores_changes(session, simulation_id):
        return await _carried_at(session, simulation_id, agent_ids, rounds)
    rows = await session.execute(
        select(Decision.agent_id, Decision.round, Decision.value, Decision.status).where(
            Decision.simulation_id == simulation_id,
            Decision.round.in_(rounds),
            Decision.agent_id.in_(agent_ids),
        )
    )
    return {(a, r): (v, s) for a, r, v, s in rows}


async def _carried_at(
    session: AsyncSession, simulation_id: int, agent_ids: list[int], rounds: list[int]
) -> dict[tuple[int, int], tuple[float | None, str]]:
    """decisions_at for a run that stores changes: each agent's latest kept row up to each
    round (only rounds the run kept)."""
    wanted = sorted(set(rounds))
    kept = set(await carried.kept_round_numbers(session, simulation_id, wanted[-1]))
    rows = await session.execute(
        select(Decision.agent_id, Decision.round, Decision.value, Decision.status)
        .select_from(SimulationRound)
        .join(
            Decision,
            and_(
                Decision.simulation_id == SimulationRound.simulation_id,
                Decision.round == SimulationRound.round,
                Decision.agent_id.in_(agent_ids),
            ),
        )
        .where(
            SimulationRound.simulation_id == simulation_id,
            SimulationRound.round <= wanted[-1],
        )
        .order_by(Decision.agent_id, Decision.round)
    )
    found: dict[tuple[int, int], tuple[float | None, str]] = {}
    for agent, runs in groupby(rows, key=lambda row: row[0]):
        history = [(r, (v, st)) for _a, r, v, st in runs]
        at = 0
        for number in wanted:
            while at + 1 < len(history) and history[at + 1][0] <= number:
                at += 1
            if number in kept and history[at][0] <= number:
                found[(agent, number)] = history[at][1]
    return found


async def valid_values(
    session: AsyncSession, simulation_id: int, round_number: int, lo: int, hi: int
) -> list[tuple[int, float]]:
    """(agent id, value) of the round's valid decisions by agents lo..hi (inclusive)."""
    if await stores_changes(session, simulation_id):
        state = await carried.carried_round(session, simulation_id, round_number, (lo, hi))
        if state.round != round_number:
            return []
        valid = state.status == VALID
        return list(zip(state.agent_ids[valid].tolist(), state.values[valid].tolist(), strict=True))
    stmt = select(Decision.agent_id, Decision.value).where(
        Decision.simulation_id == simulation_id,
        Decision.round == round_number,
        Decision.agent_id >= lo,
        Decision.agent_id <= hi,
        Decision.status == decision.VALID,
    )
    return [(agent_id, value) for agent_id, value in await session.execute(stmt)]


async def round_endpoints(session: AsyncSession, simulation_id: int) -> list[list[dict]]:
    """Every kept round's stored LLM meters, in round order (a run's meters are their sum)."""
    rows = await session.scalars(
        select(SimulationRound.endpoints)
        .where(SimulationRound.simulation_id == simulation_id)
        .order_by(SimulationRound.round)
    )
    return [list(r or []) for r in rows]


async def set_cancel_reason(session: AsyncSession, simulation_id: int, reason: str) -> None:
    """Why an operator cancels an active run (kept only while it is still active)."""
    await session.execute(
        update(Simulation)
        .where(
            Simulation.id == simulation_id,
            Simulation.status.in_(lifecycle.ACTIVE),
        )
        .values(cancel_reason=reason)
    )
    await session.commit()


async def set_group_labels(session: AsyncSession, simulation_id: int, labels: list[str]) -> None:
    """A run grouped by an attribute: its groups' category names, in group order."""
    await session.execute(
        update(Simulation).where(Simulation.id == simulation_id).values(group_labels=labels)
    )
    await session.commit()


async def set_record(session: AsyncSession, simulation_id: int, record: dict[str, Any]) -> None:
    """The run's reproducibility record (backend.simulations.record), as complete as known."""
    await session.execute(
        update(Simulation).where(Simulation.id == simulation_id).values(record=record)
    )
    await session.commit()


async def count_decisions(session: AsyncSession, simulation_id: int) -> int:
    return await session.scalar(
        select(func.count()).select_from(Decision).where(Decision.simulation_id == simulation_id)
    )


# --- decisions export ----------------------------------------------------------------------


async def iter_decision_pages(
    sessionmaker: async_sessionmaker,
    simulation_id: int,
    round_number: int | None = None,
    page: int = EXPORT_PAGE,
) -> AsyncIterator[list[tuple]]:
    """(round, agent_id, value, status, response) rows in export order, one keyset page at a
    time, each page its own short read: memory stays at one page whatever the simulation's size.

    Round by round, then by agent id within the round: equality on (simulation_id, round) and a
    range on agent_id is a plain seek in the primary key on both databases (a row-value range
    over the whole key is not, on SQLite).
    """
    async with sessionmaker() as session:
        carry = await stores_changes(session, simulation_id)
    if carry:
        async for rows in _carried_pages(sessionmaker, simulation_id, round_number, page):
            yield rows
        return
    if round_number is None:
        async with sessionmaker() as session:
            # Rounds and their decisions are written in one transaction: the same set.
            rounds = list(
                await session.scalars(
                    select(SimulationRound.round)
                    .where(SimulationRound.simulation_id == simulation_id)
                    .order_by(SimulationRound.round)
                )
            )
    else:
        rounds = [round_number]
    for number in rounds:
        after = FIRST_AGENT_ID
        while True:
            async with sessionmaker() as session:
                rows = await _decision_page(session, simulation_id, number, after, page)
            if rows:
                yield rows
            if len(rows) < page:
                break
            after = rows[-1][1]


async def _carried_pages(
    sessionmaker: async_sessionmaker, simulation_id: int, round_number: int | None, page: int
) -> AsyncIterator[list[tuple]]:
    """iter_decision_pages for a run that stores changes: every agent's decision in every round
    (or one), carried forward round by round from the rows kept (carried.py). Memory: every
    agent's decision once (17 bytes an agent) and a page of rows."""
    async with sessionmaker() as session:
        numbers = await carried.kept_round_numbers(
            session, simulation_id, round_number if round_number is not None else 2**31 - 1
        )
    if round_number is not None and round_number not in numbers:
        return
    state = carried.CarriedRound.empty()
    for number in numbers:
        # Each round's rows read in a short session of its own, like the pages of a full run.
        async with sessionmaker() as session:
            await carried.apply_round(session, state, simulation_id, number)
        if round_number is not None and number != round_number:
            continue
        for start in range(0, len(state.agent_ids), page):
            yield await asyncio.to_thread(state.rows, start, start + page)


_PAGE_SQL = (
    "SELECT round, agent_id, value, status, response FROM decisions "
    "WHERE simulation_id = {0} AND round = {1} AND agent_id > {2} ORDER BY agent_id LIMIT {3}"
)
# Below every agent id: the first page's cursor.
FIRST_AGENT_ID = -(2**63)


async def _decision_page(
    session: AsyncSession, simulation_id: int, round_number: int, after: int, limit: int
) -> list[tuple]:
    """One page straight from the driver: the ORM (or even Core's row objects) costs about
    three times the query itself for a 10^4-row page."""
    conn = await session.connection()
    params = (simulation_id, round_number, after, limit)
    if _dialect(session) == "postgresql":
        raw = await conn.get_raw_connection()
        return await raw.driver_connection.fetch(_PAGE_SQL.format("$1", "$2", "$3", "$4"), *params)
    result = await conn.exec_driver_sql(_PAGE_SQL.format("?", "?", "?", "?"), params)
    return result.all()


async def kept_actions(
    session: AsyncSession, simulation_id: int, round_number: int
) -> RoundActions:
    """A kept round's decisions as its plugin resolved them: columns in agent id order."""
    if await stores_changes(session, simulation_id):
        state = await carried.carried_round(session, simulation_id, round_number)
        if state.round != round_number:
            state = carried.CarriedRound.empty()
        return RoundActions(round_number, state.agent_ids, state.values, state.status)
    rows = (
        await session.execute(
            select(Decision.agent_id, Decision.value, Decision.status)
            .where(Decision.simulation_id == simulation_id, Decision.round == round_number)
            .order_by(Decision.agent_id)
        )
    ).all()
    codes = {name: code for code, name in enumerate(STATUS_NAMES)}
    return RoundActions(
        round=round_number,
        agent_ids=np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)),
        values=np.fromiter(
            (np.nan if r[1] is None else r[1] for r in rows), dtype=np.float64, count=len(rows)
        ),
        status=np.fromiter((codes[r[2]] for r in rows), dtype=np.uint8, count=len(rows)),
    )
