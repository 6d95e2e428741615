"""Decisions as CSV or JSON lines, streamed page by page.

The bytes depend only on the stored rows: rows come in primary-key order (round, agent id) and
numbers are written as Python's shortest round-trip repr, so two runs with the same seed export
byte-identical files.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator, Iterable

from sqlalchemy.ext.asyncio import async_sessionmaker

from backend.simulations.store import iter_decision_pages

FORMATS = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson"}
COLUMNS = ("round", "agent_id", "value", "status", "response")


def _number(value: float | None) -> str:
    return "" if value is None else repr(float(value))


def csv_rows(rows: Iterable[tuple], header: bool) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    if header:
        writer.writerow(COLUMNS)
    for round_number, agent_id, value, status, response in rows:
        writer.writerow((round_number, agent_id, _number(value), status, response or ""))
    return out.getvalue()


def jsonl_rows(rows: Iterable[tuple]) -> str:
    return "".join(
        json.dumps(
            {
                "round": round_number,
                "agent_id": agent_id,
                "value": None if value is None else float(value),
                "status": status,
                "response": response,
            },
            separators=(",", ":"),
            ensure_ascii=False,
        )
        + "\n"
        for round_number, agent_id, value, status, response in rows
    )


async def stream(
    sessionmaker: async_sessionmaker, simulation_id: int, fmt: str, round_number: int | None
) -> AsyncIterator[bytes]:
    """The export, one page of rows per chunk; a CSV always starts with its header."""
    if fmt == "csv":
        yield csv_rows((), header=True).encode()
    async for rows in iter_decision_pages(sessionmaker, simulation_id, round_number):
        text = csv_rows(rows, header=False) if fmt == "csv" else jsonl_rows(rows)
        yield text.encode()
