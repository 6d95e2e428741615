"""The population store: populations and their agents, written in bulk and read in keyset pages.

An agent's id is (population_id << 32) | index, assigned here rather than by a sequence, so a
population is one contiguous id range: bulk inserts need no round trip for ids, pages are keyset
scans of the primary key, and deletes walk the range in bounded chunks, each its own transaction
(a 10^6-agent delete never holds SQLite's single writer lock for long).

Every function takes an AsyncSession and commits its own writes, like the worker registry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from itertools import islice, repeat
from typing import Any

import numpy as np
from sqlalchemy import (
    Executable,
    case,
    delete,
    exists,
    false,
    func,
    insert,
    literal,
    select,
    text,
    true,
    type_coerce,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import INT64_MAX, Agent, Placement, Population
from backend.db.times import utcnow
from backend.errors import Conflict, NotFound
from backend.lifecycles import population as lifecycle

INDEX_BITS = 32
MAX_POPULATION_SIZE = 1 << INDEX_BITS
# Rows per transaction when deleting or re-marking a population's agents.
CHUNK_ROWS = 50_000
# Rows per executemany on SQLite (COPY on Postgres streams whatever it is given).
SQLITE_BATCH = 10_000

AGENT_COLUMNS = ("id", "population_id", "attributes", "persona")
_SQLITE_INSERT = f"INSERT INTO agents ({', '.join(AGENT_COLUMNS)}) VALUES ({', '.join('?' * len(AGENT_COLUMNS))})"

# One dict per agent, or columns: {attribute name: one value per agent} (lists or numpy arrays).
Attributes = Sequence[Mapping[str, Any]] | Mapping[str, Sequence[Any] | np.ndarray]


class UnknownPopulation(NotFound):
    what = "population"


class ConfigPopulationMissing(UnknownPopulation):
    """The population a config names does not exist."""

    template = "population {0} does not exist"


class UnknownAgent(NotFound):
    what = "agent"


class AgentOfNoPopulation(UnknownAgent):
    """An agent id whose population does not exist (its history is gone too); raised with
    (agent, population)."""

    template = "agent {0} not found (no population {1})"


class AgentNotInPopulation(UnknownAgent):
    """An agent id outside the population a simulation ran; raised with (agent, simulation)."""

    template = "agent {0} is not in simulation {1}'s population"


class PopulationNotPlayable(Conflict):
    """A population that is not deployed (or degraded) asked to play or be repaired."""

    def __init__(self, population: Population, consequence: str) -> None:
        super().__init__(f"population {population.id} is {population.status}: {consequence}")


def require_playable(population: Population, consequence: str) -> Population:
    """The population, or PopulationNotPlayable ending with `consequence` (what is refused)."""
    if not lifecycle.is_playable(population.status):
        raise PopulationNotPlayable(population, consequence)
    return population


class PopulationNotDeploying(Exception):
    """Agents may only be added while their population is deploying (not after a delete began)."""

    def __init__(self, population_id: int, status: str):
        super().__init__(f"population {population_id} is {status}, not deploying")
        self.population_id = population_id
        self.status = status


def agent_id(population_id: int, index: int) -> int:
    if not 0 <= index < MAX_POPULATION_SIZE:
        raise ValueError(f"agent index {index} outside [0, 2**{INDEX_BITS})")
    return (population_id << INDEX_BITS) | index


def population_of(agent: int) -> int:
    return agent >> INDEX_BITS


def id_range(population_id: int) -> tuple[int, int]:
    """The half-open id range [lo, hi) holding every agent of the population."""
    # Capped so the last population's bound still fits a BIGINT (its index 2**32 - 1 is far
    # beyond any population size).
    return population_id << INDEX_BITS, min((population_id + 1) << INDEX_BITS, INT64_MAX)


def _dialect(session: AsyncSession) -> str:
    return session.get_bind().dialect.name


# --- populations ---------------------------------------------------------------------------


async def create_population(
    session: AsyncSession, name: str, size: int, seed: int, config: dict[str, Any]
) -> Population:
    if not 0 <= size <= MAX_POPULATION_SIZE:
        raise ValueError(f"size {size} outside [0, 2**{INDEX_BITS}]")
    now = utcnow()
    population = Population(
        name=name,
        size=size,
        seed=seed,
        status=lifecycle.DEPLOYING,
        config=config,
        counts={},
        error=None,
        created_at=now,
        updated_at=now,
    )
    session.add(population)
    await session.commit()
    return population


async def statuses(
    session: AsyncSession, among: Sequence[str], ids: Sequence[int] | None = None
) -> dict[int, str]:
    """{population id: status} of the populations in one of the statuses `among` (of these
    ids, when given)."""
    stmt = select(Population.id, Population.status).where(Population.status.in_(among))
    if ids is not None:
        stmt = stmt.where(Population.id.in_(ids))
    return {pid: status for pid, status in await session.execute(stmt.order_by(Population.id))}


async def get_population(session: AsyncSession, population_id: int) -> Population:
    population = await session.get(Population, population_id, populate_existing=True)
    if population is None:
        raise UnknownPopulation(population_id)
    return population


async def find_population(session: AsyncSession, population_id: int) -> Population | None:
    """The population's row, or None (a run's results outlive its population's row)."""
    return await session.get(Population, population_id)


async def count_by_status(session: AsyncSession) -> dict[str, int]:
    """{status: populations in it} (for the metrics scrape)."""
    stmt = select(Population.status, func.count()).group_by(Population.status)
    return {status: n for status, n in await session.execute(stmt)}


async def set_status(
    session: AsyncSession,
    population_id: int,
    status: str,
    *,
    counts: dict[str, Any] | None = None,
    error: str | None = None,
    hosted: int | None = None,
) -> Population:
    """Move the population to status, from a status the table in backend.lifecycles.population
    allows (TransitionRefused otherwise)."""
    values: dict[str, Any] = {"status": status, "updated_at": utcnow()}
    if counts is not None:
        values["counts"] = counts
    if hosted is not None:
        values["hosted"] = hosted
    if error is not None:
        values["error"] = error
    stmt = (
        update(Population)
        .where(
            Population.id == population_id,
            Population.status.in_(lifecycle.MACHINE.sources(status)),
        )
        .values(**values)
        .returning(Population)
        .execution_options(synchronize_session=False, populate_existing=True)
    )
    population = (await session.execute(stmt)).scalar_one_or_none()
    if population is None:
        current = await session.scalar(
            select(Population.status).where(Population.id == population_id)
        )
        await session.commit()
        if current is None:
            raise UnknownPopulation(population_id)
        raise lifecycle.MACHINE.error(lifecycle.MACHINE.name, current, status)
    await session.commit()
    return population


async def set_graph(
    session: AsyncSession, population_id: int, graph: dict[str, Any] | None
) -> None:
    """Store (or clear) the population's graph description (committed)."""
    await session.execute(
        update(Population)
        .where(Population.id == population_id)
        .values(graph=graph, updated_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    await session.commit()


async def list_populations(
    session: AsyncSession,
    *,
    after: int | None = None,
    limit: int = 50,
    include_deleted: bool = False,
) -> tuple[list[Population], int | None]:
    stmt = select(Population).order_by(Population.id).limit(limit + 1)
    if after is not None:
        stmt = stmt.where(Population.id > after)
    if not include_deleted:
        stmt = stmt.where(Population.status != lifecycle.DELETED)
    rows = list((await session.execute(stmt)).scalars())
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (rows[-1].id if more else None)


# --- bulk insert ---------------------------------------------------------------------------


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def attributes_json(attributes: Attributes) -> list[str]:
    """Serialize attributes to one JSON object text per agent.

    Columns are fast: categories repeat, so each (name, value) fragment is encoded once and the
    objects are joined from fragments.
    """
    if isinstance(attributes, Mapping):
        fragment_columns = []
        for name, values in attributes.items():
            key = json.dumps(name) + ": "
            cache: dict[Any, str] = {}
            plain = values.tolist() if isinstance(values, np.ndarray) else values
            column = []
            for value in plain:
                fragment = cache.get(value)
                if fragment is None:
                    fragment = cache[value] = key + json.dumps(value, default=_json_default)
                column.append(fragment)
            fragment_columns.append(column)
        if not fragment_columns:
            raise ValueError("attribute columns are empty; pass one dict per agent instead")
        lengths = {len(c) for c in fragment_columns}
        if len(lengths) != 1:
            raise ValueError(f"attribute columns differ in length: {sorted(lengths)}")
        return ["{" + ", ".join(parts) + "}" for parts in zip(*fragment_columns, strict=True)]
    return [json.dumps(a, default=_json_default) for a in attributes]


async def bulk_insert_agents(
    session: AsyncSession,
    population_id: int,
    start_index: int,
    attributes: Attributes,
    personas: Sequence[str],
    worker_ids: Sequence[int | None] | np.ndarray | None = None,
) -> int:
    """Insert agents start_index .. start_index + len(personas) - 1 of a deploying population,
    in one transaction (committed): COPY on Postgres, executemany of plain tuples on SQLite.

    Call it once per chunk (e.g. 50k agents) so memory stays flat; worker_ids None leaves the
    agents unplaced. Raises PopulationNotDeploying once a delete has begun, so a deploy racing a
    delete stops at its next chunk instead of writing agents nobody will clean up.
    """
    n = len(personas)
    if n == 0:
        return 0
    if start_index < 0 or start_index + n > MAX_POPULATION_SIZE:
        raise ValueError(f"agent indexes {start_index}..{start_index + n - 1} out of range")
    attrs = attributes_json(attributes)
    if isinstance(worker_ids, np.ndarray):
        workers: Sequence[int | None] = worker_ids.tolist()
    elif worker_ids is None:
        workers = [None] * n
    else:
        workers = worker_ids
    if len(attrs) != n or len(workers) != n:
        raise ValueError(
            f"lengths differ: personas {n}, attributes {len(attrs)}, worker_ids {len(workers)}"
        )

    # Also starts the transaction the COPY joins; FOR SHARE holds off a concurrent status change
    # (a delete) on Postgres until this chunk commits.
    status = await session.scalar(
        select(Population.status).where(Population.id == population_id).with_for_update(read=True)
    )
    if status is None:
        raise UnknownPopulation(population_id)
    if status != lifecycle.DEPLOYING:
        await session.rollback()
        raise PopulationNotDeploying(population_id, status)

    first = agent_id(population_id, start_index)
    records = zip(range(first, first + n), repeat(population_id), attrs, personas)
    conn = await session.connection()
    if _dialect(session) == "postgresql":
        raw = await conn.get_raw_connection()
        await raw.driver_connection.copy_records_to_table(
            "agents", records=records, columns=AGENT_COLUMNS
        )
    else:
        while batch := list(islice(records, SQLITE_BATCH)):
            await conn.exec_driver_sql(_SQLITE_INSERT, batch)
    await _place_new(session, population_id, first, workers)
    await session.commit()
    return n


async def analyze_agents(session: AsyncSession) -> None:
    """Refresh the planner's statistics after a bulk load (Postgres only).

    Until autovacuum gets to it, Postgres plans page queries for a table it believes is tiny and
    may scan a whole population to return 100 rows.
    """
    if _dialect(session) == "postgresql":
        await session.execute(text("ANALYZE agents"))
        await session.commit()


# --- placements: where agents are, by id ranges -------------------------------------------

# A range as read: [start, stop) on worker (None: placed nowhere), orphaned or not.
Range = tuple[int, int, int | None, bool]


def _runs(first: int, workers: Sequence[int | None]) -> list[tuple[int, int, int | None]]:
    """(start, stop, worker) runs of consecutive ids sharing a worker, ids from `first` on."""
    codes = np.fromiter(
        (-1 if w is None else w for w in workers), dtype=np.int64, count=len(workers)
    )
    edges = np.flatnonzero(np.diff(codes)) + 1
    starts = np.concatenate(([0], edges)).tolist()
    stops = np.concatenate((edges, [len(codes)])).tolist()
    return [
        (first + a, first + b, None if codes[a] < 0 else int(codes[a]))
        for a, b in zip(starts, stops, strict=True)
    ]


def _on(worker: int | None):
    return Placement.worker_id.is_(None) if worker is None else Placement.worker_id == worker


async def _place_new(
    session: AsyncSession, population_id: int, first: int, workers: Sequence[int | None]
) -> None:
    """Ranges for agents just added from id `first` on (in their transaction). A run that
    continues the range ending at `first` on the same worker extends it, so a deploy written
    in chunks keeps one range per worker process."""
    runs = _runs(first, workers)
    start, stop, worker = runs[0]
    extended = await session.execute(
        update(Placement)
        .where(
            Placement.population_id == population_id,
            Placement.stop == start,
            _on(worker),
            Placement.orphaned == false(),
        )
        .values(stop=stop)
        .execution_options(synchronize_session=False)
    )
    fresh = runs[1:] if extended.rowcount else runs
    if fresh:
        await session.execute(
            insert(Placement),
            [
                {"population_id": population_id, "start": a, "stop": b, "worker_id": w}
                for a, b, w in fresh
            ],
        )


async def _ranges(
    session: AsyncSession,
    population_id: int | None = None,
    *,
    worker_id: int | None = None,
    orphaned: bool | None = None,
) -> list[Range]:
    """The ranges (of a population, on a worker, orphaned or not, when given), by start."""
    stmt = select(
        Placement.start, Placement.stop, Placement.worker_id, Placement.orphaned
    ).order_by(Placement.population_id, Placement.start)
    if population_id is not None:
        stmt = stmt.where(Placement.population_id == population_id)
    if worker_id is not None:
        stmt = stmt.where(Placement.worker_id == worker_id)
    if orphaned is not None:
        stmt = stmt.where(Placement.orphaned == (true() if orphaned else false()))
    return [(int(a), int(b), w, bool(o)) for a, b, w, o in (await session.execute(stmt)).all()]


def _merged(ranges: Sequence[Range]) -> list[Range]:
    """Adjacent ranges with the same worker and flag as one (ranges sorted by start)."""
    out: list[Range] = []
    for start, stop, worker, orphaned in ranges:
        if out and out[-1][1] == start and out[-1][2:] == (worker, orphaned):
            out[-1] = (out[-1][0], stop, worker, orphaned)
        else:
            out.append((start, stop, worker, orphaned))
    return out


async def _id_spans(
    session: AsyncSession,
    population_id: int | None,
    worker_id: int | None,
    orphaned: bool | None,
) -> list[tuple[int, int]]:
    """The id spans [start, stop), in order, holding the agents a page may show."""
    if worker_id is not None:
        ranges = await _ranges(session, population_id, worker_id=worker_id, orphaned=orphaned)
        return [(a, b) for a, b, *_ in _merged(ranges)]
    whole = id_range(population_id) if population_id is not None else (0, INT64_MAX)
    if orphaned is None:
        return [whole]
    orphans = [(a, b) for a, b, *_ in await _ranges(session, population_id, orphaned=True)]
    if orphaned:
        return orphans
    spans, start = [], whole[0]  # the gaps between orphan ranges (orphans are rare)
    for a, b in sorted(orphans):
        if a > start:
            spans.append((start, a))
        start = max(start, b)
    if start < whole[1]:
        spans.append((start, whole[1]))
    return spans


# --- reads ---------------------------------------------------------------------------------


def attribute_equals(session: AsyncSession, name: str, value: Any):
    if _dialect(session) == "postgresql":
        # `attributes @> '{"name": value}'` is served by the jsonb_path_ops GIN index.
        return type_coerce(Agent.attributes, JSONB).contains({name: value})
    path = '$."' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return func.json_extract(Agent.attributes, path) == value


async def page_agents(
    session: AsyncSession,
    *,
    population_id: int | None = None,
    worker_id: int | None = None,
    attribute: tuple[str, Any] | None = None,
    orphaned: bool | None = False,
    after: int | None = None,
    limit: int = 100,
) -> tuple[list[Agent], int | None]:
    """Keyset page ordered by id. A page is stable under inserts: rows added later either have
    ids beyond the cursor or belong to another id range, so earlier pages never shift.

    orphaned: False (default) live agents only, True orphans only, None both. A worker's agents
    are read range by range (a handful), each a scan of the primary key from the cursor on.
    """
    rows: list[Agent] = []
    floor = -1 if after is None else after
    for start, stop in await _id_spans(session, population_id, worker_id, orphaned):
        if stop <= floor + 1:
            continue
        stmt = (
            select(Agent)
            .where(Agent.id >= max(start, floor + 1), Agent.id < stop)
            .order_by(Agent.id)
            .limit(limit + 1 - len(rows))
        )
        if population_id is not None:
            stmt = stmt.where(Agent.population_id == population_id)
        if attribute is not None:
            stmt = stmt.where(attribute_equals(session, *attribute))
        rows.extend((await session.execute(stmt)).scalars())
        if len(rows) > limit:
            break
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (rows[-1].id if more else None)


async def agent_population(session: AsyncSession, agent: int) -> Population:
    """The population an agent id belongs to (the agent itself may be deleted: its results
    outlive it); AgentOfNoPopulation when that population does not exist."""
    try:
        return await get_population(session, population_of(agent))
    except UnknownPopulation:
        raise AgentOfNoPopulation(agent, population_of(agent)) from None


def check_member(agent: int, population_id: int, simulation_id: int) -> None:
    """AgentNotInPopulation unless the agent id is of the population simulation_id ran."""
    if population_of(agent) != population_id:
        raise AgentNotInPopulation(agent, simulation_id)


async def get_agent(session: AsyncSession, agent: int) -> Agent:
    row = await session.get(Agent, agent)
    if row is None:
        raise UnknownAgent(agent)
    return row


async def count_agents(session: AsyncSession, population_id: int) -> int:
    """Every row of the population, orphans included (zero once cleanup is complete)."""
    lo, hi = id_range(population_id)
    return await session.scalar(
        select(func.count()).select_from(Agent).where(Agent.id >= lo, Agent.id < hi)
    )


async def has_agents_on(
    session: AsyncSession, population_id: int, worker_ids: Sequence[int]
) -> bool:
    """Whether the store places any of the population's agents on these workers."""
    stmt = select(
        exists().where(
            Placement.population_id == population_id, Placement.worker_id.in_(worker_ids)
        )
    )
    return bool(await session.scalar(stmt))


async def sample_agents(session: AsyncSession, population_id: int, limit: int) -> list[Agent]:
    """The population's first `limit` agents by id."""
    lo, hi = id_range(population_id)
    stmt = select(Agent).where(Agent.id >= lo, Agent.id < hi).order_by(Agent.id).limit(limit)
    return list(await session.scalars(stmt))


async def agents_by_id(session: AsyncSession, ids: Sequence[int]) -> dict[int, Agent]:
    """The rows of these agents (those that exist), by id."""
    if not ids:
        return {}
    return {a.id: a for a in await session.scalars(select(Agent).where(Agent.id.in_(ids)))}


_EXPORT_AGENTS_PG = "SELECT id, attributes::text{0} FROM agents WHERE id = ANY($1::bigint[])"
# One parameter whatever the page's size: SQLite caps a statement's parameters.
_EXPORT_AGENTS_SQLITE = (
    "SELECT id, attributes{0} FROM agents WHERE id IN (SELECT value FROM json_each(?))"
)


async def export_agent_rows(session: AsyncSession, ids: list[int], persona: bool) -> list:
    """(id, attributes, persona if asked) of those of these agents that still have a row,
    straight from the driver (an export joins them to every page of decisions). Attributes
    come as JSON text or, on SQLite, as the driver returns them."""
    persona_sql = ", persona" if persona else ""
    conn = await session.connection()
    if conn.dialect.name == "postgresql":
        raw = await conn.get_raw_connection()
        return await raw.driver_connection.fetch(_EXPORT_AGENTS_PG.format(persona_sql), ids)
    result = await conn.exec_driver_sql(
        _EXPORT_AGENTS_SQLITE.format(persona_sql), (json.dumps(ids),)
    )
    return result.all()


async def prompt_group_sizes(
    session: AsyncSession,
    population_id: int,
    persona: bool,
    attributes: Sequence[str],
    label: str | None = None,
) -> list[tuple[int | None, str | None, int, int]]:
    """How the population's agents fall into groups that a prompt naming the persona (when
    asked) and these attributes cannot tell apart, per worker (orphans left out): (worker_id,
    the group's value of `label`, agents in the group, groups of that size). Counted in SQL,
    so a million agents with a million personas come back as a few rows."""
    lo, hi = id_range(population_id)
    keys = [Placement.worker_id.label("worker_id")]
    if persona:
        keys.append(Agent.persona)
    keys += [Agent.attributes[name].as_string() for name in attributes]
    # The label is one of the keys (Postgres refuses a constant in GROUP BY: none without it).
    label_key = Agent.attributes[label].as_string() if label else None
    grouped = [*keys, label_key] if label_key is not None else keys
    shown = label_key if label_key is not None else literal(None)
    groups = (
        select(*keys, shown.label("label"), func.count().label("agents"))
        .select_from(Agent)
        # Each range's agents: a scan of the primary key per range (a handful).
        .join(
            Placement,
            (Placement.population_id == population_id)
            & (Agent.id >= Placement.start)
            & (Agent.id < Placement.stop),
        )
        .where(Agent.id >= lo, Agent.id < hi, Placement.orphaned == false())
        .group_by(*grouped)
        .subquery()
    )
    sizes = select(groups.c.worker_id, groups.c.label, groups.c.agents, func.count()).group_by(
        groups.c.worker_id, groups.c.label, groups.c.agents
    )
    return [tuple(row) for row in (await session.execute(sizes)).all()]


def _size():
    """Agents in a range (a sum of these is a Numeric on Postgres: callers take int())."""
    return Placement.stop - Placement.start


async def agents_per_worker(session: AsyncSession, population_id: int) -> dict[int | None, int]:
    """{worker_id: agents of the population it hosts} (None: not placed), orphans included."""
    stmt = (
        select(Placement.worker_id, func.sum(_size()))
        .where(Placement.population_id == population_id)
        .group_by(Placement.worker_id)
    )
    return {worker: int(n) for worker, n in (await session.execute(stmt)).all()}


async def placement_runs(session: AsyncSession, population_id: int) -> list[tuple[int, int | None]]:
    """(first id, worker) of each run of consecutive agents on one worker, in id order."""
    merged: list[tuple[int, int | None]] = []
    for start, _, worker, _ in await _ranges(session, population_id):
        if not merged or merged[-1][1] != worker:
            merged.append((start, worker))
    return merged


async def agent_spans(session: AsyncSession, population_id: int) -> dict[int, tuple[int, int]]:
    """{worker_id: (lowest, highest) number of the population's agents it hosts}."""
    lo, _ = id_range(population_id)
    stmt = (
        select(Placement.worker_id, func.min(Placement.start), func.max(Placement.stop))
        .where(Placement.population_id == population_id, Placement.worker_id.is_not(None))
        .group_by(Placement.worker_id)
    )
    rows = (await session.execute(stmt)).all()
    return {worker: (low - lo, high - 1 - lo) for worker, low, high in rows}


# --- delete and orphans --------------------------------------------------------------------


async def _delete_ranges(
    session: AsyncSession, population_id: int, ranges: Sequence[Range], chunk: int
) -> int:
    """Delete the agents of these ranges of a population and the ranges, in chunks of ids, one
    commit each; each chunk's range shrinks with it, so ranges and rows always agree."""
    total = 0
    for start, stop, *_ in ranges:
        at = start
        while at < stop:
            end = min(at + chunk, stop)
            result = await session.execute(
                delete(Agent)
                .where(Agent.id >= at, Agent.id < end)
                .execution_options(synchronize_session=False)
            )
            total += result.rowcount
            this = (Placement.population_id == population_id) & (Placement.start == at)
            if end < stop:
                await session.execute(
                    update(Placement)
                    .where(this)
                    .values(start=end)
                    .execution_options(synchronize_session=False)
                )
            else:
                await session.execute(
                    delete(Placement).where(this).execution_options(synchronize_session=False)
                )
            await session.commit()
            at = end
    return total


async def delete_population_rows(
    session: AsyncSession,
    population_id: int,
    *,
    final_status: str = lifecycle.DELETED,
    error: str | None = None,
    chunk: int = CHUNK_ROWS,
    orphans_too: bool = False,
) -> int:
    """Delete the population's agents in bounded transactions, then set final_status
    (deleted; failed when undoing a deploy).

    Idempotent. Status is deleting meanwhile, so a deploy still inserting stops at its next
    chunk. Orphaned agents (mark_orphaned first) stay until delete_on_worker unless orphans_too;
    the population row stays as history. Returns the number of rows deleted.
    """
    population = await get_population(session, population_id)
    if population.status not in (lifecycle.DELETING, lifecycle.DELETED):
        await set_status(session, population_id, lifecycle.DELETING)
    ranges = await _ranges(session, population_id, orphaned=None if orphans_too else False)
    await session.commit()
    deleted = await _delete_ranges(session, population_id, ranges, chunk)
    # The error lands with the final status, so nobody reads "failed" without its reason; no
    # agent is left, so none is hosted.
    await set_status(session, population_id, final_status, error=error, hosted=0)
    return deleted


async def mark_orphaned(
    session: AsyncSession, population_id: int, worker_ids: Sequence[int]
) -> int:
    """Flag the population's agents on these (offline) workers as orphans; returns how many."""
    if not worker_ids:
        return 0
    sizes = await session.scalars(
        update(Placement)
        .where(Placement.population_id == population_id, Placement.worker_id.in_(list(worker_ids)))
        .values(orphaned=True)
        .returning(_size())
        .execution_options(synchronize_session=False)
    )
    marked = sum(int(n) for n in sizes)
    await session.commit()
    return marked


async def orphans_by_worker(session: AsyncSession, worker_ids: list[int]) -> dict[int, list[int]]:
    """{worker id: [population ids it holds orphans of]} for these workers, in one query."""
    stmt = (
        select(Placement.worker_id, Placement.population_id)
        .where(Placement.orphaned == true())
        .group_by(Placement.worker_id, Placement.population_id)
        .order_by(Placement.worker_id, Placement.population_id)
    )
    wanted = set(worker_ids)
    found: dict[int, list[int]] = {}
    for worker_id, population_id in (await session.execute(stmt)).all():
        if worker_id in wanted:
            found.setdefault(worker_id, []).append(population_id)
    return found


async def delete_orphans_on(session: AsyncSession, worker_ids: Executable) -> int:
    """Delete the orphans on these workers (a subquery of their ids, e.g. the removed ones);
    returns how many rows went."""
    rows = (
        await session.execute(
            select(Placement.population_id, Placement.start, Placement.stop)
            .where(Placement.orphaned == true(), Placement.worker_id.in_(worker_ids))
            .order_by(Placement.population_id, Placement.start)
        )
    ).all()
    deleted = 0
    for population_id, start, stop in rows:
        deleted += await _delete_ranges(
            session, population_id, [(start, stop, None, True)], CHUNK_ROWS
        )
    return deleted


async def orphans_on_worker(session: AsyncSession, worker_id: int) -> list[tuple[int, int]]:
    """[(population_id, orphan count)] for a worker, e.g. when it comes back online."""
    stmt = (
        select(Placement.population_id, func.sum(_size()))
        .where(Placement.worker_id == worker_id, Placement.orphaned == true())
        .group_by(Placement.population_id)
        .order_by(Placement.population_id)
    )
    return [(population, int(n)) for population, n in (await session.execute(stmt)).all()]


async def populations_on_worker(
    session: AsyncSession, worker_id: int
) -> list[tuple[int, str, int]]:
    """[(population_id, population status, live agents)] placed on a worker, orphans left out."""
    stmt = (
        select(Placement.population_id, Population.status, func.sum(_size()))
        .join(Population, Population.id == Placement.population_id)
        .where(Placement.worker_id == worker_id, Placement.orphaned == false())
        .group_by(Placement.population_id, Population.status)
        .order_by(Placement.population_id)
    )
    return [(pid, status, int(n)) for pid, status, n in (await session.execute(stmt)).all()]


async def delete_on_worker(
    session: AsyncSession,
    population_id: int,
    worker_id: int,
    *,
    orphaned: bool,
    chunk: int = CHUNK_ROWS,
) -> int:
    """Drop the population's rows placed on one worker once it has removed those agents: its
    orphans (back from offline) or its live agents (the worker was emptied); returns how many."""
    ranges = await _ranges(session, population_id, worker_id=worker_id, orphaned=orphaned)
    await session.commit()
    return await _delete_ranges(session, population_id, ranges, chunk)


# --- dedicated processes -------------------------------------------------------------------


async def dedicated_population_ids(session: AsyncSession) -> list[int]:
    """The populations holding workers that asked for a worker process per agent (a few rows:
    each population's config is read, not its agents)."""
    rows = await session.execute(
        select(Population.id, Population.config).where(Population.status.in_(lifecycle.HOLDING))
    )
    return [pid for pid, config in rows if is_dedicated(config)]


ATTRIBUTE_PAGE = 100_000


async def agent_attribute(
    session: AsyncSession, population_id: int, attribute: str
) -> tuple[np.ndarray, np.ndarray]:
    """Every agent's value of one attribute, as text ("" where it has none), in id order:
    (agent numbers, values). A page of agents a query."""
    lo, hi = id_range(population_id)
    value = Agent.attributes[attribute].as_string()
    numbers: list[np.ndarray] = []
    values: list[str] = []
    after = lo - 1
    while True:
        rows = (
            await session.execute(
                select(Agent.id, value)
                .where(Agent.id > after, Agent.id < hi)
                .order_by(Agent.id)
                .limit(ATTRIBUTE_PAGE)
            )
        ).all()
        if not rows:
            break
        ids, page = zip(*rows, strict=True)
        numbers.append(np.asarray(ids, dtype=np.int64) - lo)
        values.extend("" if v is None else str(v) for v in page)
        after = ids[-1]
    agents = np.concatenate(numbers) if numbers else np.zeros(0, dtype=np.int64)
    return agents, np.asarray(values, dtype=str)


async def populations_using_upload(session: AsyncSession, name: str) -> list[int]:
    """The populations holding agents whose graph reads this upload (edge list or node table:
    the keeper reads them again to re-place agents). A few rows: configs, not agents."""
    rows = await session.execute(
        select(Population.id, Population.config).where(Population.status.in_(lifecycle.HOLDING))
    )
    return sorted(pid for pid, config in rows if name in uploads_of(config))


def uploads_of(config: Mapping[str, Any] | None) -> set[str]:
    graph = (config or {}).get("graph") or {}
    names = {graph.get("upload"), (graph.get("nodes") or {}).get("upload")}
    return {n for n in names if n}


def is_dedicated(config: Mapping[str, Any] | None) -> bool:
    """Whether a stored population config asks for a worker process per agent."""
    return bool(((config or {}).get("placement") or {}).get("dedicated_process"))


async def workers_hosting(session: AsyncSession, population_id: int) -> set[int]:
    """The workers the store places any of the population's agents on."""
    stmt = (
        select(Placement.worker_id)
        .where(Placement.population_id == population_id, Placement.worker_id.is_not(None))
        .distinct()
    )
    return set(await session.scalars(stmt))


async def workers_with_agents(session: AsyncSession, worker_ids: Sequence[int]) -> set[int]:
    """Those of these workers the store places any agent on."""
    if not worker_ids:
        return set()
    stmt = select(Placement.worker_id).where(Placement.worker_id.in_(list(worker_ids))).distinct()
    return set(await session.scalars(stmt))


# --- placement changes (repair) ------------------------------------------------------------


async def agent_ids_on(
    session: AsyncSession, population_id: int, worker_ids: Sequence[int | None]
) -> np.ndarray:
    """The population's agent ids placed on these workers (None: on none), sorted (int64):
    built from their ranges, no agent row is read."""
    wanted = set(worker_ids)
    spans = [(a, b) for a, b, w, _ in await _ranges(session, population_id) if w in wanted]
    if not spans:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate([np.arange(a, b, dtype=np.int64) for a, b in spans])


async def move_agents(
    session: AsyncSession,
    population_id: int,
    ids: np.ndarray,
    from_workers: Sequence[int | None],
    to_worker: int | None,
) -> int:
    """Place the agents `ids` (sorted, a slice of agent_ids_on(from_workers)) on to_worker.

    Every agent between the slice's first and last id still placed on one of from_workers
    belongs to the slice (it is contiguous in that sorted set), so the population's ranges are
    cut at its ends and the parts inside change worker: a few ranges are rewritten, whatever
    the number of agents.
    """
    if len(ids) == 0:
        return 0
    first, last = int(ids[0]), int(ids[-1]) + 1
    movable = set(from_workers)
    # Postgres: one placement change of a population at a time (a deploy adding agents holds
    # the same lock); SQLite has a single writer anyway.
    await session.execute(
        select(Population.id).where(Population.id == population_id).with_for_update()
    )
    ranges, moved = [], 0
    for start, stop, worker, orphaned in await _ranges(session, population_id):
        if worker not in movable or stop <= first or start >= last:
            ranges.append((start, stop, worker, orphaned))
            continue
        inside = (max(start, first), min(stop, last))
        moved += inside[1] - inside[0]
        cut = [(start, inside[0], worker, orphaned), (*inside, to_worker, False)]
        cut.append((inside[1], stop, worker, orphaned))
        ranges.extend(r for r in cut if r[0] < r[1])
    await session.execute(
        delete(Placement)
        .where(Placement.population_id == population_id)
        .execution_options(synchronize_session=False)
    )
    await session.execute(
        insert(Placement),
        [
            {"population_id": population_id, "start": a, "stop": b, "worker_id": w, "orphaned": o}
            for a, b, w, o in _merged(ranges)
        ],
    )
    await session.commit()
    return moved


async def _driver_rows(session: AsyncSession, statement: Executable) -> list:
    """Rows straight from the driver: for hundreds of thousands of rows the ORM's (or Core's)
    row objects cost several times the query. Only for statements whose parameters are
    integers we produced (they are inlined)."""
    conn = await session.connection()
    sql = str(statement.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True}))
    if _dialect(session) == "postgresql":
        raw = await conn.get_raw_connection()
        return await raw.driver_connection.fetch(sql)
    return (await conn.exec_driver_sql(sql)).all()


async def personas_of(session: AsyncSession, ids: np.ndarray, page: int = 50_000) -> list[str]:
    """Personas of these agents (sorted ids), in the same order.

    Keyset pages over the id range they span, read through the driver and kept where they are
    wanted: a re-placed worker's agents are mostly one run of ids, and lists of ids in IN
    clauses through the ORM cost about 13 µs per agent (6.5 s for 500,000)."""
    if len(ids) == 0:
        return []
    personas: list[str] = []
    after, last = int(ids[0]) - 1, int(ids[-1])
    while after < last:
        rows = await _driver_rows(
            session,
            select(Agent.id, Agent.persona)
            .where(Agent.id > after, Agent.id <= last)
            .order_by(Agent.id)
            .limit(page),
        )
        if not rows:
            break
        page_ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        within = ids[
            np.searchsorted(ids, page_ids[0]) : np.searchsorted(ids, page_ids[-1], "right")
        ]
        wanted = np.flatnonzero(np.isin(page_ids, within, assume_unique=True))
        personas.extend(rows[i][1] for i in wanted.tolist())
        after = int(page_ids[-1])
    await session.commit()
    if len(personas) != len(ids):
        raise UnknownAgent(f"{len(ids) - len(personas)} of the agents asked for have no row")
    return personas


async def agents_on_workers(session: AsyncSession, worker_ids: Sequence[int]) -> dict[int, int]:
    """{worker_id: agents the store places on it}, over every population (a few ranges each)."""
    if not worker_ids:
        return {}
    rows = await session.execute(
        select(Placement.worker_id, func.sum(_size()))
        .where(Placement.worker_id.in_(list(worker_ids)))
        .group_by(Placement.worker_id)
    )
    return {worker: int(n) for worker, n in rows.all()}


_UNCHANGED: Any = object()


async def set_hosted(
    session: AsyncSession, population_id: int, hosted: int, *, reason: str | None = _UNCHANGED
) -> Population | None:
    """Record how many agents live workers host; deployed when all, degraded otherwise.
    `reason`, when given, becomes the population's error (why it is degraded; None clears it).

    Only a deployed or degraded population changes (a delete or a failed deploy wins)."""
    values: dict[str, Any] = {
        "hosted": hosted,
        "status": case((Population.size <= hosted, lifecycle.DEPLOYED), else_=lifecycle.DEGRADED),
        "updated_at": utcnow(),
    }
    if reason is not _UNCHANGED:
        values["error"] = reason
    population = await session.scalar(
        update(Population)
        .where(
            Population.id == population_id,
            Population.status.in_(lifecycle.PLAYABLE),
        )
        .values(**values)
        .returning(Population)
        .execution_options(synchronize_session=False, populate_existing=True)
    )
    await session.commit()
    return population
