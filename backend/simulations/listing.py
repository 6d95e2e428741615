"""The runs list as a research table: filtered by name, population, status, plugin and sweep,
sorted by a column, paged by a keyset cursor, each run with its sweep's name and the metrics of
its last kept round.

Everything is done in SQL, so a page costs the same whatever the number of runs: one query for
the page (the sweep's name joined in), one for the page's last metrics. Every order ends on the
id, so equal values (two runs named alike) keep one order and the cursor, the last row's
(value, id), resumes exactly after it.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import INT32_MAX, Simulation, SimulationRound, Sweep
from backend.errors import Invalid

# The columns a list can be sorted by, ascending; `-name` sorts descending.
SORT_COLUMNS: dict[str, ColumnElement[Any]] = {
    "id": Simulation.id,
    "created_at": Simulation.created_at,
    # Case-insensitively, so "beta" sits between "Alpha" and "Gamma".
    "name": func.lower(Simulation.name),
    "status": Simulation.status,
    "population_id": Simulation.population_id,
    "rounds": Simulation.rounds,
    "current_round": Simulation.current_round,
}
SORTS = tuple(key for column in SORT_COLUMNS for key in (column, f"-{column}"))
DATETIME_SORTS = {"created_at"}


@dataclass(frozen=True)
class RunFilters:
    q: str | None = None
    population_id: int | None = None
    statuses: tuple[str, ...] = ()
    plugin: str | None = None
    sweep_id: int | None = None

    def where(self) -> list[ColumnElement[bool]]:
        clauses: list[ColumnElement[bool]] = []
        if self.q:
            clauses.append(Simulation.name.icontains(self.q, autoescape=True))
        if self.population_id is not None:
            clauses.append(Simulation.population_id == self.population_id)
        if self.statuses:
            clauses.append(Simulation.status.in_(self.statuses))
        if self.plugin is not None:
            # json_extract on SQLite, #>> on PostgreSQL: stored configs name their plugin
            # under plugin.name (alembic 0015).
            clauses.append(Simulation.config[("plugin", "name")].as_string() == self.plugin)
        if self.sweep_id is not None:
            clauses.append(Simulation.sweep_id == self.sweep_id)
        return clauses


@dataclass(frozen=True)
class ListedRun:
    simulation: Simulation
    sweep_name: str | None
    last_metrics: dict[str, Any]


@dataclass(frozen=True)
class RunPage:
    runs: list[ListedRun]
    next_cursor: str | None
    # The last id, for clients paging by `after` (sorted by id only).
    next_after: int | None


def _column(sort: str) -> tuple[str, ColumnElement[Any], bool]:
    key = sort.removeprefix("-")
    return key, SORT_COLUMNS[key], sort.startswith("-")


def encode_cursor(sort: str, value: Any, simulation_id: int) -> str:
    """The cursor after a row: its sort value as the database computed it (lower() of a name
    is the database's, not Python's) and its id."""
    if isinstance(value, datetime):
        value = value.isoformat()
    raw = json.dumps([sort, value, simulation_id], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


NOT_A_CURSOR = "not a cursor this list gave: pass next_cursor as it came"


def decode_cursor(sort: str, cursor: str) -> tuple[Any, int]:
    """(value, id) of the row the previous page ended on; a 422 naming `cursor` when it is not
    one this list gave for this sort (nothing the database could refuse gets through: a 500)."""
    loc = ("query", "cursor")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        given, value, last_id = json.loads(raw)
    except (binascii.Error, UnicodeDecodeError, ValueError, TypeError):
        raise Invalid(NOT_A_CURSOR, loc) from None
    if given != sort:
        if given in SORTS:
            raise Invalid(f"this cursor pages sort={given}, not sort={sort}: start again", loc)
        raise Invalid(NOT_A_CURSOR, loc)
    if not _an_id(last_id):
        raise Invalid(NOT_A_CURSOR, loc)
    key = sort.removeprefix("-")
    if key in DATETIME_SORTS:
        try:
            value = datetime.fromisoformat(value)
        except (TypeError, ValueError):
            raise Invalid(NOT_A_CURSOR, loc) from None
        if value.tzinfo is not None:  # the store's times are naive UTC
            raise Invalid(NOT_A_CURSOR, loc)
    elif key in ("name", "status"):
        if not isinstance(value, str) or "\x00" in value or len(value) > 400:
            raise Invalid(NOT_A_CURSOR, loc)
    elif not _an_id(value):  # the integer columns are int32
        raise Invalid(NOT_A_CURSOR, loc)
    return value, last_id


def _an_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= INT32_MAX


def _after(column: ColumnElement[Any], descending: bool, value: Any, last_id: int):
    if descending:
        return or_(column < value, and_(column == value, Simulation.id < last_id))
    return or_(column > value, and_(column == value, Simulation.id > last_id))


async def list_runs(
    session: AsyncSession,
    filters: RunFilters,
    *,
    sort: str = "id",
    cursor: str | None = None,
    after: int | None = None,
    limit: int = 100,
) -> RunPage:
    """One page of runs matching `filters` in `sort` order, after `cursor` (any sort) or
    `after` (an id, when sorted by id)."""
    key, column, descending = _column(sort)
    if after is not None and key != "id":
        raise Invalid(
            f"after pages runs sorted by id: with sort={sort} pass cursor=next_cursor",
            ("query", "after"),
        )
    stmt = (
        select(Simulation, Sweep.name, column.label("sort_value"))
        .outerjoin(Sweep, Sweep.id == Simulation.sweep_id)
        .where(*filters.where())
        .order_by(column.desc() if descending else column.asc())
        .limit(limit + 1)
    )
    if key != "id":
        stmt = stmt.order_by(Simulation.id.desc() if descending else Simulation.id.asc())
    if cursor is not None:
        stmt = stmt.where(_after(column, descending, *decode_cursor(sort, cursor)))
    elif after is not None:
        stmt = stmt.where(Simulation.id < after if descending else Simulation.id > after)
    rows = (await session.execute(stmt)).all()
    more = len(rows) > limit
    rows = rows[:limit]
    metrics = await last_metrics(session, [simulation.id for simulation, _, _ in rows])
    runs = [ListedRun(s, sweep_name, metrics.get(s.id, {})) for s, sweep_name, _ in rows]
    if not more:
        return RunPage(runs=runs, next_cursor=None, next_after=None)
    last, _, value = rows[-1]
    return RunPage(
        runs=runs,
        next_cursor=encode_cursor(sort, value, last.id),
        next_after=last.id if key == "id" else None,
    )


async def last_metrics(
    session: AsyncSession, simulation_ids: Sequence[int]
) -> dict[int, dict[str, Any]]:
    """Each run's declared metrics of its last kept round, {name: value}, by run id (none for a
    run without rounds), in one query; only the metrics column is read."""
    if not simulation_ids:
        return {}
    last = (
        select(SimulationRound.simulation_id, func.max(SimulationRound.round).label("round"))
        .where(SimulationRound.simulation_id.in_(simulation_ids))
        .group_by(SimulationRound.simulation_id)
        .subquery()
    )
    rows = await session.execute(
        select(SimulationRound.simulation_id, SimulationRound.metrics).join(
            last,
            and_(
                SimulationRound.simulation_id == last.c.simulation_id,
                SimulationRound.round == last.c.round,
            ),
        )
    )
    return {sid: metrics or {} for sid, metrics in rows}
