"""A run's group metrics as a file (GET /api/simulations/{id}/groups/export): one row per
group per round, `round,group,<metric>...` in CSV or one JSON object a line, streamed a slice
of groups at a time (whole columns formatted at once, not value by value)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator

import numpy as np
from sqlalchemy.ext.asyncio import async_sessionmaker

from backend.simulations import group_store

FORMATS = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson"}
GROUPS_PER_CHUNK = 20_000


def _column(values: np.ndarray, groups: int) -> np.ndarray:
    """A metric's values as text, '' where there is none (NaN, or past its array's end)."""
    full = np.full(groups, np.nan)
    full[: len(values)] = values[:groups]
    return np.where(np.isnan(full), "", full.astype(str))


def _csv_text(text: str) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow([text])
    return out.getvalue()


def csv_chunk(
    round_number: int, start: int, columns: list[np.ndarray], labels: list[str] | None = None
) -> str:
    """Rows `round,group[,label],<metric>...`; a label is quoted as CSV needs."""
    groups = np.arange(start, start + len(columns[0]))
    leading = [groups.astype(str)]
    if labels is not None:
        quoted = np.asarray([_csv_text(label) for label in labels] + [""], dtype=object)
        leading.append(quoted[np.minimum(groups, len(labels))])
    rows = zip(*leading, *columns, strict=True)
    return "".join(f"{round_number},{','.join(row)}\n" for row in rows)


def jsonl_chunk(
    round_number: int,
    start: int,
    names: list[str],
    columns: list[np.ndarray],
    labels: list[str] | None = None,
) -> str:
    lines = []
    for offset, cells in enumerate(zip(*columns, strict=True)):
        group = start + offset
        row: dict = {"round": round_number, "group": group}
        if labels is not None:
            row["label"] = labels[group] if group < len(labels) else None
        row["values"] = {n: (float(c) if c else None) for n, c in zip(names, cells, strict=True)}
        lines.append(json.dumps(row))
    return "".join(line + "\n" for line in lines)


async def stream(
    sessionmaker: async_sessionmaker,
    simulation_id: int,
    fmt: str,
    names: list[str],
    only_round: int | None,
    labels: list[str] | None = None,
) -> AsyncIterator[bytes]:
    """Every kept round's group metrics (one round's with `only_round`), names in order, with
    each group's label when the run is grouped by an attribute; a CSV starts with its header
    whatever follows."""
    if fmt == "csv":
        label = ["label"] if labels is not None else []
        yield (",".join(["round", "group", *label, *names]) + "\n").encode()
    if not names:
        return
    async with sessionmaker() as session:
        async for round_number, metrics in group_store.by_round(session, simulation_id, only_round):
            arrays = [metrics.get(name, np.empty(0)) for name in names]
            groups = max(len(a) for a in arrays)
            for start in range(0, groups, GROUPS_PER_CHUNK):
                stop = min(groups, start + GROUPS_PER_CHUNK)
                columns = [_column(a[start:stop], stop - start) for a in arrays]
                if fmt == "csv":
                    yield csv_chunk(round_number, start, columns, labels).encode()
                else:
                    yield jsonl_chunk(round_number, start, names, columns, labels).encode()
