"""Decisions as Parquet, streamed: one row group per page of decisions, written into a sink that
is drained after each row group, so the response starts at once and memory stays at one page.

Columns are typed (round int32, agent_id int64, value float64 nullable, status dictionary,
response and joined columns nullable strings); the schema's key-value metadata carries the run's
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

RECORD_KEY = "populace.record"
_FIXED_TYPES = (
    pa.int32(),  # round
    pa.int64(),  # agent_id
    pa.float64(),  # value (null unless valid)
    pa.dictionary(pa.int32(), pa.string()),  # status: four values
    pa.string(),  # response (null without store_responses)
)
# Rows arrive sorted by (round, agent_id): readers may rely on it.
_SORTED_BY = [pq.SortingColumn(0), pq.SortingColumn(1)]


def schema_for(join: Join, record: dict[str, Any] | None) -> pa.Schema:
    fields = [pa.field(name, kind) for name, kind in zip(COLUMNS, _FIXED_TYPES, strict=True)]
    fields += [pa.field(name, pa.string()) for name in join.columns]
    metadata = {RECORD_KEY: record_json(record)} if record is not None else None
    return pa.schema(fields, metadata=metadata)


def page_table(rows: Sequence[tuple], columns: list[list[str | None]], schema: pa.Schema):
    """One page of decision rows (and its joined columns) as a table of `schema`."""
    rounds, agents, values, statuses, responses = (
        zip(*rows, strict=True) if rows else ((),) * len(COLUMNS)
    )
    arrays = [
        pa.array(rounds, pa.int32()),
        pa.array(agents, pa.int64()),
        pa.array(values, pa.float64()),
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


def _write_page(writer: pq.ParquetWriter, sink: DrainedSink, page: Page, schema) -> bytes:
    rows, columns = page
    writer.write_table(page_table(rows, columns, schema), row_group_size=max(len(rows), 1))
    return sink.drain()


def _close(writer: pq.ParquetWriter, sink: DrainedSink) -> bytes:
    writer.close()
    return sink.drain()


async def parquet_chunks(
    pages: AsyncIterator[Page], join: Join, record: dict[str, Any] | None
) -> AsyncIterator[bytes]:
    """The file, one row group per page, then the footer. Encoding runs in a thread (pyarrow
    lets go of the GIL there), so the manager's loop keeps serving while a page is written."""
    schema = schema_for(join, record)
    sink = DrainedSink()
    writer = _writer(sink, schema)
    try:
        async for page in pages:
            chunk = await asyncio.to_thread(_write_page, writer, sink, page, schema)
            if chunk:
                yield chunk
        yield await asyncio.to_thread(_close, writer, sink)
    finally:
        if writer.is_open:
            writer.close()
