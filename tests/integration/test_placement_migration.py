"""Migration 0022: placements move from a column per agent to id ranges, and back."""

from __future__ import annotations

import asyncio

from sqlalchemy import text

from backend.db.migrate import downgrade, upgrade
from backend.db.session import make_engine

BEFORE = "0021_group_metrics"
LO = 7 << 32  # population 7's first agent id

# (agent number, worker, orphaned): runs on workers 1 and 2, a gap at 6, unplaced agents and a
# run of orphans on worker 3.
AGENTS = [
    *[(i, 1, False) for i in range(0, 4)],
    *[(i, 2, False) for i in range(4, 6)],
    *[(i, 1, False) for i in range(7, 9)],
    *[(i, None, False) for i in range(9, 11)],
    *[(i, 3, True) for i in range(11, 14)],
]


async def _run(url: str, *statements: tuple[str, dict | list | None]) -> list[list[tuple]]:
    engine = make_engine(url)
    results = []
    async with engine.begin() as conn:
        for sql, params in statements:
            result = await conn.execute(text(sql), params or {})
            results.append([tuple(r) for r in result.all()] if result.returns_rows else [])
    await engine.dispose()
    return results


def test_ranges_are_the_runs_of_each_worker_and_downgrade_restores_the_columns(database_url):
    upgrade(database_url, BEFORE)
    asyncio.run(
        _run(
            database_url,
            (
                "INSERT INTO agents (id, population_id, worker_id, attributes, persona, orphaned)"
                " VALUES (:id, 7, :worker, '{}', 'p', :orphaned)",
                [{"id": LO + i, "worker": w, "orphaned": o} for i, w, o in AGENTS],
            ),
        )
    )
    upgrade(database_url)
    (ranges,) = asyncio.run(
        _run(
            database_url,
            (
                "SELECT start - :lo, stop - :lo, worker_id, orphaned FROM placements"
                " WHERE population_id = 7 ORDER BY start",
                {"lo": LO},
            ),
        )
    )
    assert [(a, b, w, bool(o)) for a, b, w, o in ranges] == [
        (0, 4, 1, False),
        (4, 6, 2, False),
        (7, 9, 1, False),  # the gap at 6 splits worker 1's second run from its first
        (9, 11, None, False),
        (11, 14, 3, True),
    ]

    downgrade(database_url, BEFORE)
    (rows,) = asyncio.run(
        _run(
            database_url,
            ("SELECT id - :lo, worker_id, orphaned FROM agents ORDER BY id", {"lo": LO}),
        )
    )
    assert [(i, w, bool(o)) for i, w, o in rows] == AGENTS
    upgrade(database_url)
