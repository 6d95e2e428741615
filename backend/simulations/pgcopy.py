"""A round's decisions as Postgres binary COPY data, built column-wise with numpy.

Handing asyncpg 10^6 Python tuples costs the manager about a second of CPU a round, most of it
holding the GIL (building the tuples, then encoding them on the event loop), and every API
request and websocket waits behind it. Here each row shape (status, value present or NULL) is a
packed numpy record type whose bytes are exactly the binary COPY tuple, so a round is encoded in
a few vectorised copies, outside the event loop, and the event loop only sends the bytes.

Rows go out grouped by shape, each group in agent id order (the table's rows have no order; the
primary key orders the export). Only decisions without raw responses are encoded here: text of
any length is what the record path (copy_records_to_table) is for.

Format: https://www.postgresql.org/docs/current/sql-copy.html#id-1.9.3.55.9.4
"""

from __future__ import annotations

import struct

import numpy as np

from backend.simulations.outcome import STATUS_NAMES, DecisionTable

# Signature, flags, header extension length; and the file trailer (a field count of -1).
HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0)
TRAILER = struct.pack("!h", -1)
# The columns, in the order of the encoded fields.
COLUMNS = ("simulation_id", "round", "agent_id", "value", "status", "response")
CHUNK_BYTES = 1 << 20
NULL = -1


def _row_type(status: str, has_value: bool) -> np.dtype:
    """One tuple: a field count, then each field as its big-endian length and value."""
    fields = [
        ("fields", ">i2"),
        ("simulation_id_len", ">i4"),
        ("simulation_id", ">i4"),
        ("round_len", ">i4"),
        ("round", ">i4"),
        ("agent_id_len", ">i4"),
        ("agent_id", ">i8"),
        ("value_len", ">i4"),
    ]
    if has_value:
        fields.append(("value", ">f8"))
    fields += [("status_len", ">i4"), ("status", f"S{len(status)}"), ("response_len", ">i4")]
    return np.dtype(fields)  # packed: no alignment padding between fields


def encode(simulation_id: int, round_number: int, table: DecisionTable) -> list[memoryview]:
    """The COPY data (header, tuples, trailer) in chunks of at most CHUNK_BYTES."""
    if table.responses is not None:
        raise ValueError("decisions with responses go through the record path")
    has_value = ~np.isnan(table.values)
    chunks = [memoryview(HEADER)]
    for code, status in enumerate(STATUS_NAMES):
        for with_value in (True, False):
            rows = (table.status == code) & (has_value == with_value)
            n = int(np.count_nonzero(rows))
            if not n:
                continue
            out = np.empty(n, dtype=_row_type(status, with_value))
            out["fields"] = len(COLUMNS)
            out["simulation_id_len"] = 4
            out["simulation_id"] = simulation_id
            out["round_len"] = 4
            out["round"] = round_number
            out["agent_id_len"] = 8
            out["agent_id"] = table.agent_ids[rows]
            if with_value:
                out["value_len"] = 8
                out["value"] = table.values[rows]
            else:
                out["value_len"] = NULL
            out["status_len"] = len(status)
            out["status"] = status.encode()
            out["response_len"] = NULL
            # Views of the array, not copies: no 50 MB join holding the GIL.
            data = memoryview(out.view(np.uint8))
            chunks += [data[i : i + CHUNK_BYTES] for i in range(0, len(data), CHUNK_BYTES)]
    chunks.append(memoryview(TRAILER))
    return chunks
