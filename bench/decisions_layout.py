"""Whether fewer indexes or a narrower row would make storing a round's decisions cheaper.

On a scratch Postgres database, one round of `rows` decisions (the shape of a synthetic round:
every agent valid, a float value, no raw answer) is written into tables of four layouts, each a
partition of a LIST-partitioned parent as in the product (alembic 0008):

- `product`: the decisions table as it is: (simulation_id, round, agent_id, value, status
  varchar(8) with its CHECK, response text), primary key (simulation_id, round, agent_id);
- `no_key`: the same columns without the primary key (the heap alone: what the index costs);
- `narrow`: status as a one-byte "char" code and no response column (raw answers would live in
  a side table), with the primary key;
- `narrow_no_key`: both.

Each layout is written twice: by the product's own path (binary COPY of the data that
backend.simulations.pgcopy encodes, for `product`; the same bytes less the response field and
with the status code, for the narrow ones), timed from the first byte sent to the commit; and
server-side (INSERT ... SELECT from generate_series), which leaves the client out. Sizes are
pg_total_relation_size after the write. The primary key is what keeps a round's decisions unique
and streams the export in order without a sort, so `no_key` is a measure, not a proposal.
Prints one JSON line.
"""

from __future__ import annotations

import asyncio
import struct
import time

import asyncpg
import numpy as np

from backend.simulations import pgcopy
from backend.simulations.outcome import STATUS_NAMES, DecisionTable
from bench.deploy import _plain, scratch_database

SIMULATION_ID = 1
ROUND = 1
STATUS_CODE = b"v"  # 'valid' as a one-byte "char"

LAYOUTS = {
    "product": (
        "simulation_id integer NOT NULL, round integer NOT NULL, agent_id bigint NOT NULL, "
        "value double precision, status varchar(8) NOT NULL, response text, "
        "CONSTRAINT ck_status CHECK (status IN ('valid', 'invalid', 'late', 'lost'))",
        True,
    ),
    "no_key": (
        "simulation_id integer NOT NULL, round integer NOT NULL, agent_id bigint NOT NULL, "
        "value double precision, status varchar(8) NOT NULL, response text, "
        "CONSTRAINT ck_status CHECK (status IN ('valid', 'invalid', 'late', 'lost'))",
        False,
    ),
    "narrow": (
        "simulation_id integer NOT NULL, round integer NOT NULL, agent_id bigint NOT NULL, "
        'value double precision, status "char" NOT NULL',
        True,
    ),
    "narrow_no_key": (
        "simulation_id integer NOT NULL, round integer NOT NULL, agent_id bigint NOT NULL, "
        'value double precision, status "char" NOT NULL',
        False,
    ),
}


def _round(rows: int, seed: int = 7) -> DecisionTable:
    rng = np.random.default_rng(seed)
    return DecisionTable(
        agent_ids=np.arange(1, rows + 1, dtype=np.int64),
        values=rng.uniform(0, 100, rows),
        status=np.full(rows, STATUS_NAMES.index("valid"), dtype=np.uint8),  # all valid
        responses=None,
    )


def _narrow_copy(table: DecisionTable) -> list[memoryview]:
    """Binary COPY of (simulation_id, round, agent_id, value, status "char")."""
    row = np.dtype(
        [
            ("fields", ">i2"),
            ("simulation_id_len", ">i4"),
            ("simulation_id", ">i4"),
            ("round_len", ">i4"),
            ("round", ">i4"),
            ("agent_id_len", ">i4"),
            ("agent_id", ">i8"),
            ("value_len", ">i4"),
            ("value", ">f8"),
            ("status_len", ">i4"),
            ("status", "S1"),
        ]
    )
    out = np.empty(len(table.agent_ids), dtype=row)
    out["fields"] = 5
    out["simulation_id_len"], out["simulation_id"] = 4, SIMULATION_ID
    out["round_len"], out["round"] = 4, ROUND
    out["agent_id_len"], out["agent_id"] = 8, table.agent_ids
    out["value_len"], out["value"] = 8, table.values
    out["status_len"], out["status"] = 1, STATUS_CODE
    data = memoryview(out.view(np.uint8))
    step = pgcopy.CHUNK_BYTES
    return [
        memoryview(pgcopy.HEADER),
        *(data[i : i + step] for i in range(0, len(data), step)),
        memoryview(struct.pack("!h", -1)),
    ]


async def _create(conn, name: str) -> None:
    columns, keyed = LAYOUTS[name]
    key = ", PRIMARY KEY (simulation_id, round, agent_id)" if keyed else ""
    await conn.execute(f"DROP TABLE IF EXISTS {name}")
    await conn.execute(f"CREATE TABLE {name} ({columns}{key}) PARTITION BY LIST (simulation_id)")
    await conn.execute(
        f"CREATE TABLE {name}_{SIMULATION_ID} PARTITION OF {name} FOR VALUES IN ({SIMULATION_ID})"
    )
    await conn.execute("CHECKPOINT")  # each write starts from the same state


async def _size_mb(conn, name: str) -> float:
    size = await conn.fetchval(f"SELECT pg_total_relation_size('{name}_{SIMULATION_ID}')")
    return round(size / 2**20, 1)


async def _copy(conn, name: str, chunks: list[memoryview]) -> float:
    narrow = name.startswith("narrow")
    columns = pgcopy.COLUMNS[:5] if narrow else pgcopy.COLUMNS

    async def source():
        for chunk in chunks:
            yield chunk

    started = time.perf_counter()
    async with conn.transaction():
        await conn.copy_to_table(name, source=source(), columns=columns, format="binary")
    return time.perf_counter() - started


async def _insert_select(conn, name: str, rows: int) -> float:
    status = "'v'::\"char\"" if name.startswith("narrow") else "'valid'"
    started = time.perf_counter()
    async with conn.transaction():
        await conn.execute(
            f"INSERT INTO {name} (simulation_id, round, agent_id, value, status) "
            f"SELECT {SIMULATION_ID}, {ROUND}, g, random() * 100, {status} "
            f"FROM generate_series(1, {rows}) AS g"
        )
    return time.perf_counter() - started


async def _measure(database_url: str, rows: int) -> dict:
    table = _round(rows)
    wide = pgcopy.encode(SIMULATION_ID, ROUND, table)
    narrow = _narrow_copy(table)
    conn = await asyncpg.connect(_plain(database_url))
    figures: dict[str, dict] = {}
    try:
        for name in LAYOUTS:
            await _create(conn, name)
            copy_s = await _copy(conn, name, narrow if name.startswith("narrow") else wide)
            written = await conn.fetchval(f"SELECT count(*) FROM {name}")
            if written != rows:
                raise RuntimeError(f"{name}: {written} rows written by COPY, not {rows}")
            size = await _size_mb(conn, name)
            await _create(conn, name)
            insert_s = await _insert_select(conn, name, rows)
            figures[name] = {
                "copy_s": round(copy_s, 3),
                "insert_select_s": round(insert_s, 3),
                "size_mb": size,
            }
            await conn.execute(f"DROP TABLE {name}")
    finally:
        await conn.close()
    base = figures["product"]["copy_s"]
    for f in figures.values():
        f["copy_vs_product"] = round(f["copy_s"] / base, 3)
    return figures


def run(
    rows: int = 10_000_000, admin_url: str = "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
) -> dict:
    with scratch_database(admin_url) as database_url:
        figures = asyncio.run(_measure(database_url, rows))
    return {"benchmark": "decisions-layout", "rows": rows, "layouts": figures}
