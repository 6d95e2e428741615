"""The export's page writers: CSV and JSON lines with joined columns, and streamed Parquet."""

from __future__ import annotations

import csv
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq

from backend.simulations.export import (
    COLUMNS,
    Join,
    attribute_names,
    attribute_text,
    csv_rows,
    jsonl_rows,
    record_json,
)
from backend.simulations.export_parquet import RECORD_KEY, parquet_chunks

ROWS = [
    (1, 4294967296, 0.30000000000000004, "valid", None),
    (1, 4294967297, None, "invalid", 'he said "fifty",\nthen 50'),
    (2, 4294967296, 10.0, "valid", "10"),
]
JOIN = Join(attributes=("education", "value"), persona=True)
# Agent 4294967297 has no row any more: its joined columns are None.
JOINED = [
    ["doctorate", None, "doctorate"],
    ["3", None, "3"],
    ["You are a doctor.", None, "You are a doctor."],
]
RECORD = {"simulation": {"id": 1, "seed": "18446744073709551615"}, "population": None}


def test_joined_columns_follow_the_fixed_ones_and_never_shadow_them():
    assert JOIN.columns == ("education", "attribute_value", "persona")
    assert not Join() and Join(persona=True)
    config = {"distributions": [{"name": "occupation", "bins": None}, {"name": "age", "bins": []}]}
    assert attribute_names(config) == ("occupation", "age", "age_value")
    assert attribute_names(None) == ()
    assert [attribute_text(v) for v in ("a", 3, 2.5, True, None)] == ["a", "3", "2.5", "true", None]


def test_csv_with_joined_columns_leaves_missing_agents_empty():
    text = csv_rows(ROWS, header=True, extra=(JOIN.columns, JOINED))
    parsed = list(csv.reader(io.StringIO(text)))
    assert parsed[0] == [*COLUMNS, "education", "attribute_value", "persona"]
    assert parsed[1][5:] == ["doctorate", "3", "You are a doctor."]
    assert parsed[2][4] == 'he said "fifty",\nthen 50' and parsed[2][5:] == ["", "", ""]
    # Without a join the bytes are the plain export's.
    assert csv_rows(ROWS, header=True, extra=((), [])) == csv_rows(ROWS, header=True)


def test_jsonl_with_joined_columns_writes_nulls():
    lines = jsonl_rows(ROWS, extra=(JOIN.columns, JOINED)).splitlines()
    assert json.loads(lines[0]) == {
        "round": 1,
        "agent_id": 4294967296,
        "value": 0.30000000000000004,
        "status": "valid",
        "response": None,
        "education": "doctorate",
        "attribute_value": "3",
        "persona": "You are a doctor.",
    }
    assert json.loads(lines[1])["education"] is None
    assert jsonl_rows(ROWS, extra=((), [])) == jsonl_rows(ROWS)


async def _pages(pages):
    for page in pages:
        yield page


async def _parquet(pages, join=JOIN, record=RECORD) -> list[bytes]:
    return [chunk async for chunk in parquet_chunks(_pages(pages), join, record)]


def _split(rows, columns, at):
    return [(rows[:at], [c[:at] for c in columns]), (rows[at:], [c[at:] for c in columns])]


async def test_parquet_streams_one_row_group_per_page_with_typed_columns_and_the_record():
    chunks = await _parquet(_split(ROWS, JOINED, 2))
    # The magic number first, a chunk per row group, then the footer.
    assert len(chunks) == 3 and chunks[0].startswith(b"PAR1") and chunks[-1].endswith(b"PAR1")
    data = b"".join(chunks)
    parquet = pq.ParquetFile(io.BytesIO(data))
    assert parquet.metadata.num_row_groups == 2 and parquet.metadata.num_rows == 3
    table = pq.read_table(io.BytesIO(data))
    assert table.schema.field("round").type == pa.int32()
    assert table.schema.field("agent_id").type == pa.int64()
    assert table.schema.field("value").type == pa.float64()
    assert pa.types.is_dictionary(table.schema.field("status").type)
    assert table.schema.field("education").type == pa.string()
    assert table.column_names == [*COLUMNS, *JOIN.columns]
    assert table.column("value").to_pylist() == [0.30000000000000004, None, 10.0]
    assert table.column("status").to_pylist() == ["valid", "invalid", "valid"]
    assert table.column("response").to_pylist() == [None, 'he said "fifty",\nthen 50', "10"]
    assert table.column("attribute_value").to_pylist() == ["3", None, "3"]
    assert json.loads(table.schema.metadata[RECORD_KEY.encode()]) == RECORD
    assert table.schema.metadata[RECORD_KEY.encode()] == record_json(RECORD).encode()


async def test_parquet_bytes_depend_only_on_the_rows():
    once = b"".join(await _parquet(_split(ROWS, JOINED, 1)))
    again = b"".join(await _parquet(_split(ROWS, JOINED, 1)))
    assert once == again
    changed = [(1, 4294967296, 0.3, "valid", None), *ROWS[1:]]
    assert b"".join(await _parquet(_split(changed, JOINED, 1))) != once


async def test_an_empty_parquet_export_is_a_valid_file_with_its_columns():
    data = b"".join(await _parquet([], join=Join(), record=None))
    table = pq.read_table(io.BytesIO(data))
    assert table.num_rows == 0 and table.column_names == list(COLUMNS)
    assert table.schema.metadata is None or RECORD_KEY.encode() not in table.schema.metadata
