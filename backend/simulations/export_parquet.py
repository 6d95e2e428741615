"""Decisions as Parquet, streamed: one row group per page of decisions, written into a sink that
is drained after each row group, so the response starts at once and memory stays at one page.

Columns are typed (round int32, agent_id int64, value nullable in the action's type: float64,
int64, a dictionary of option names or bool; status dictionary, response and joined columns
nullable strings); the schema's key-value metadata carries the run's
reproducibility record under `populace.record`. The bytes depend only on the stored rows and the
pyarrow version (its `created_by`): the writer puts no timestamp anywhere, and the record is
canonical JSON.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from backend.simulations.export import COLUMNS, Join, Page, record_json
from backend.simulations.export_values import NUMBER, ValueType

RECORD_KEY = "populace.record"
_STATUS = pa.dictionary(pa.int32(), pa.string())  # four values
_VALUE_TYPES = {
    "number": pa.float64(),
    "integer": pa.int64(),
    "choice": pa.dictionary(pa.int32(), pa.string()),
    "boolean": pa.bool_(),
}


def _fixed_types(values: ValueType) -> tuple[pa.DataType, ...]:
    return (
        pa.int32(),  # round
        pa.int64(),  # agent_id
        _VALUE_TYPES[values.kind],  # value (null unless valid)
        _STATUS,
        pa.string(),  # response (null without store_responses)
    )


# Rows arrive sorted by (round, agent_id): readers may rely on it.
_SORTED_BY = [pq.SortingColumn(0), pq.SortingColumn(1)]


def schema_for(join: Join, record: dict[str, Any] | None, values: ValueType = NUMBER) -> pa.Schema:
    fixed = _fixed_types(values)
    fields = [pa.field(name, kind) for name, kind in zip(COLUMNS, fixed, strict=True)]
    fields += [pa.field(name, pa.string()) for name in join.columns]
    metadata = {RECORD_KEY: record_json(record)} if record is not None else None
    return pa.schema(fields, metadata=metadata)


def page_table(
    rows: Sequence[tuple],
    columns: list[list[str | None]],
    schema: pa.Schema,
    values: ValueType = NUMBER,
):
    """One page of decision rows (and its joined columns) as a table of `schema`."""
    rounds, agents, stored, statuses, responses = (
        zip(*rows, strict=True) if rows else ((),) * len(COLUMNS)
    )
    if values.kind == "number":
        value_array = pa.array(stored, pa.float64())
    elif values.kind == "choice":
        names = pa.array([values.json(v) for v in stored], pa.string())
        value_array = names.dictionary_encode()
    else:
        value_array = pa.array([values.json(v) for v in stored], _VALUE_TYPES[values.kind])
    arrays = [
        pa.array(rounds, pa.int32()),
        pa.array(agents, pa.int64()),
        value_array,
        pa.array(statuses, pa.string()).dictionary_encode(),
        pa.array(responses, pa.string()),
        *(pa.array(column, pa.string()) for column in columns),
    ]
    return pa.Table.from_arrays(arrays, schema=schema)


class DrainedSink:
    """A write-only file for ParquetWriter that hands over what was written since last asked."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._position = 0
        self.closed = False

    def write(self, data) -> int:
        chunk = bytes(data)
        self._parts.append(chunk)
        self._position += len(chunk)
        return len(chunk)

    def tell(self) -> int:
        return self._position

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def drain(self) -> bytes:
        out, self._parts = b"".join(self._parts), []
        return out


def _writer(sink: DrainedSink, schema: pa.Schema) -> pq.ParquetWriter:
    return pq.ParquetWriter(sink, schema, compression="zstd", sorting_columns=_SORTED_BY)


def _write_page(
    writer: pq.ParquetWriter, sink: DrainedSink, page: Page, schema, values: ValueType
) -> bytes:
    rows, columns = page
    table = page_table(rows, columns, schema, values)
    writer.write_table(table, row_group_size=max(len(rows), 1))
    return sink.drain()


def _close(writer: pq.ParquetWriter, sink: DrainedSink) -> bytes:
    writer.close()
    return sink.drain()


async def parquet_chunks(
    pages: AsyncIterator[Page],
    join: Join,
    record: dict[str, Any] | None,
    values: ValueType = NUMBER,
) -> AsyncIterator[bytes]:
    """The file, one row group per page, then the footer. Encoding runs in a thread (pyarrow
    lets go of the GIL there), so the manager's loop keeps serving while a page is written."""
    schema = schema_for(join, record, values)
    sink = DrainedSink()
    writer = _writer(sink, schema)
    try:
        async for page in pages:
            chunk = await asyncio.to_thread(_write_page, writer, sink, page, schema, values)
            if chunk:
                yield chunk
        yield await asyncio.to_thread(_close, writer, sink)
    finally:
        if writer.is_open:
            writer.close()
