"""Decisions as CSV, JSON lines or Parquet, streamed page by page, optionally joined with each
agent's attributes and persona, and the run's reproducibility record.

The bytes depend only on the stored rows: rows come in primary-key order (round, agent id) and
numbers are written as Python's shortest round-trip repr, so two runs with the same seed export
byte-identical files. Without attributes or persona, CSV and JSON lines are exactly the columns
of COLUMNS.

The join reads one page of decisions, then that page's agents in one query: memory stays at one
page whatever the simulation's size. Agents' rows go when their population is deleted (its row
stays), so their attribute and persona columns are then empty (null).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy.ext.asyncio import async_sessionmaker

from backend.populations import store as population_store
from backend.simulations.export_values import NUMBER, ValueType
from backend.simulations.mixture import AgentParts
from backend.simulations.store import iter_decision_pages
from backend.simulations.validity import run_validity
from backend.wire import config_for_browsers

FORMATS = {
    "csv": "text/csv; charset=utf-8",
    "jsonl": "application/x-ndjson",
    "parquet": "application/vnd.apache.parquet",
}
COLUMNS = ("round", "agent_id", "value", "status", "response")
PERSONA_COLUMN = "persona"
# A mixed run's exports say which part of its policy each agent played (its label).
POLICY_COLUMN = "policy"
# An attribute named like a fixed column gets this prefix, so no column is ever shadowed.
ATTRIBUTE_PREFIX = "attribute_"

# One page of decision rows and its joined columns (one list per column, aligned with the rows).
Page = tuple[Sequence[tuple], list[list[str | None]]]
# Joined columns as the text writers take them: (column names, columns).
Extra = tuple[Sequence[str], list[list[str | None]]]


@dataclass(frozen=True)
class Join:
    """What to join to each decision: these attributes (config order) and maybe the persona."""

    attributes: tuple[str, ...] = ()
    persona: bool = False
    # A mixed run's parts: who played which policy (the policy column, last).
    policy: AgentParts | None = None

    @property
    def columns(self) -> tuple[str, ...]:
        """The extra columns' names, after COLUMNS."""
        reserved = {*COLUMNS, PERSONA_COLUMN, POLICY_COLUMN}
        names = tuple(ATTRIBUTE_PREFIX + n if n in reserved else n for n in self.attributes)
        names += (PERSONA_COLUMN,) if self.persona else ()
        return names + ((POLICY_COLUMN,) if self.policy is not None else ())

    def __bool__(self) -> bool:
        return bool(self.attributes) or self.persona or self.policy is not None


def attribute_names(population_config: dict[str, Any] | None) -> tuple[str, ...]:
    """The population's attributes: its distributions, in config order, a binned one followed
    by its drawn number (`<name>_value`, as agents store it)."""
    names: list[str] = []
    for distribution in (population_config or {}).get("distributions", []):
        names.append(distribution["name"])
        if distribution.get("bins") is not None:
            names.append(f"{distribution['name']}_value")
    return tuple(names)


def join_for(population, attributes: bool, persona: bool, policy: AgentParts | None = None) -> Join:
    names = attribute_names(population.config if population is not None else None)
    return Join(attributes=names if attributes else (), persona=persona, policy=policy)


def export_record(simulation, population) -> dict[str, Any]:
    """What a researcher needs to reproduce or cite a run: the simulation's settings and the
    population it ran on. Seeds are decimal strings (JavaScript numbers stop at 2^53)."""
    return {
        "simulation": {
            "id": simulation.id,
            "name": simulation.name,
            "population_id": simulation.population_id,
            "seed": str(simulation.seed),
            "rounds": simulation.rounds,
            "config": config_for_browsers(simulation.config or {}),
            "version": simulation.version,
            "models": list(simulation.models or []),
            "record": simulation.record or {},
            # Whether every round kept enough valid answers (backend.simulations.validity).
            "validity": run_validity(simulation.participation_floor, simulation.rounds_below_floor),
        },
        "population": None
        if population is None
        else {
            "id": population.id,
            "name": population.name,
            "size": population.size,
            "seed": str(population.seed),
            "config": config_for_browsers(population.config or {}),
        },
    }


def record_json(record: dict[str, Any]) -> str:
    """The record as canonical JSON (sorted keys), so it adds the same bytes every time."""
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def csv_rows(
    rows: Iterable[tuple], header: bool, extra: Extra | None = None, values: ValueType = NUMBER
) -> str:
    """CSV lines; `extra` = (column names, columns) appends joined columns (None → empty);
    `values` writes each value in the run's action type."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    names, columns = extra if extra is not None else ((), [])
    if header:
        writer.writerow((*COLUMNS, *names))
    if columns:
        for (round_number, agent_id, value, status, response), *joined in zip(
            rows, *columns, strict=True
        ):
            writer.writerow(
                (round_number, agent_id, values.text(value), status, response or "", *joined)
            )
        return out.getvalue()
    for round_number, agent_id, value, status, response in rows:
        writer.writerow((round_number, agent_id, values.text(value), status, response or ""))
    return out.getvalue()


def _decision_object(row: tuple, values: ValueType) -> dict[str, Any]:
    round_number, agent_id, value, status, response = row
    return {
        "round": round_number,
        "agent_id": agent_id,
        "value": values.json(value),
        "status": status,
        "response": response,
    }


def _json_line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n"


def jsonl_rows(
    rows: Iterable[tuple], extra: Extra | None = None, values: ValueType = NUMBER
) -> str:
    """JSON lines; `extra` = (column names, columns) adds joined keys after the fixed ones."""
    if extra is None or not extra[1]:
        return "".join(_json_line(_decision_object(row, values)) for row in rows)
    names, columns = extra
    return "".join(
        _json_line({**_decision_object(row, values), **dict(zip(names, joined, strict=True))})
        for row, *joined in zip(rows, *columns, strict=True)
    )


def attribute_text(value: Any) -> str | None:
    """One attribute as exported: categories as they are, bin values as decimal text."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


async def _agents_of(
    sessionmaker: async_sessionmaker, ids: list[int], persona: bool
) -> dict[int, tuple[dict[str, Any], str | None]]:
    """{agent id: (attributes, persona)} for those of these agents that still have a row."""
    async with sessionmaker() as session:
        rows = await population_store.export_agent_rows(session, ids, persona)
    found: dict[int, tuple[dict[str, Any], str | None]] = {}
    for row in rows:
        attributes = row[1]
        if isinstance(attributes, str | bytes):
            attributes = json.loads(attributes)
        found[row[0]] = (attributes or {}, row[2] if persona else None)
    return found


async def joined_columns(
    sessionmaker: async_sessionmaker, rows: Sequence[tuple], join: Join
) -> list[list[str | None]]:
    """The join's columns for one page of decisions (None where the agent has no row)."""
    if not join:
        return []
    columns: list[list[str | None]] = []
    if join.attributes or join.persona:
        agents = await _agents_of(sessionmaker, sorted({row[1] for row in rows}), join.persona)
        missing: tuple[dict[str, Any], str | None] = ({}, None)
        per_row = [agents.get(row[1], missing) for row in rows]
        columns = [
            [attribute_text(attrs.get(name)) for attrs, _ in per_row] for name in join.attributes
        ]
        if join.persona:
            columns.append([persona for _, persona in per_row])
    if join.policy is not None:
        # The page's parts at once (numpy), then each part's label.
        parts = join.policy.of(np.fromiter((row[1] for row in rows), np.int64, len(rows)))
        columns.append(np.asarray(join.policy.labels, dtype=object)[parts].tolist())
    return columns


async def iter_pages(
    sessionmaker: async_sessionmaker, simulation_id: int, round_number: int | None, join: Join
) -> AsyncIterator[Page]:
    """Decision pages in export order, each with its joined columns."""
    async for rows in iter_decision_pages(sessionmaker, simulation_id, round_number):
        yield rows, await joined_columns(sessionmaker, rows, join)


async def stream(
    sessionmaker: async_sessionmaker,
    simulation_id: int,
    fmt: str,
    round_number: int | None,
    join: Join | None = None,
    record: dict[str, Any] | None = None,
    values: ValueType = NUMBER,
) -> AsyncIterator[bytes]:
    """The export, one page of rows per chunk, each value in the run's action type (`values`);
    a CSV always starts with its header. Parquet carries `record` in its schema's metadata."""
    join = join or Join()
    pages = iter_pages(sessionmaker, simulation_id, round_number, join)
    if fmt == "parquet":
        # pyarrow is loaded on the first Parquet export only: the manager starts without it.
        from backend.simulations.export_parquet import parquet_chunks

        async for chunk in parquet_chunks(pages, join, record, values):
            yield chunk
        return
    names = join.columns
    if fmt == "csv":
        yield csv_rows((), header=True, extra=(names, [])).encode()
    async for rows, columns in pages:
        extra = (names, columns)
        if fmt == "csv":
            text = csv_rows(rows, False, extra, values)
        else:
            text = jsonl_rows(rows, extra, values)
        yield text.encode()
