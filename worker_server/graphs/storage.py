"""A population's graph on disk: one file, checksummed per block, read back memory-mapped.

Layout (little-endian): 8-byte magic, uint32 header length, 16-byte BLAKE2b of the header,
the header (JSON: nodes, edges, each array's dtype/offset/count, a BLAKE2b-128 per 4 MiB block
of each array, free-form `meta`), then indptr (int64) and indices (int32 or int64), each at a
64-byte aligned offset so numpy maps them in place. No pickle anywhere: the header is JSON and
the arrays raw numbers.

Written to a temporary file in the same directory, fsynced, then renamed over the target, so a
reader sees the old file or the new one, never half of one. A worker that hosts agents a..b
maps the file and reads only their rows (`StoredGraph.rows`), checking only the blocks it read.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from worker_server.graphs.csr import Graph

MAGIC = b"PPLGRAPH"
FORMAT_VERSION = 1
PREFIX = struct.Struct("<8sI16s")  # magic, header length, header digest
BLOCK_BYTES = 4 * 2**20
ALIGN = 64
MAX_HEADER_BYTES = 16 * 2**20  # 10^8 edges need ~200 block digests; this bounds a bad length


class GraphFileError(ValueError):
    """The file is not a graph file, or it is truncated or corrupt (says where)."""


def _digest(data) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _block_digests(array: np.ndarray, block_bytes: int) -> list[str]:
    raw = memoryview(np.ascontiguousarray(array)).cast("B")
    return [_digest(raw[i : i + block_bytes]) for i in range(0, len(raw), block_bytes)]


def _aligned(offset: int) -> int:
    return -(-offset // ALIGN) * ALIGN


def write_graph(
    path: Path, graph: Graph, meta: dict[str, Any] | None = None, block_bytes: int = BLOCK_BYTES
) -> int:
    """Write graph (and JSON-able meta) to path atomically; return the file's size in bytes."""
    path = Path(path)
    arrays = {
        "indptr": np.ascontiguousarray(graph.indptr, dtype="<i8"),
        "indices": np.ascontiguousarray(graph.indices, dtype=graph.indices.dtype.newbyteorder("<")),
    }
    header: dict[str, Any] = {
        "format": FORMAT_VERSION,
        "nodes": graph.nodes,
        "edges": graph.edges,
        "block_bytes": block_bytes,
        "arrays": {},
        "meta": meta or {},
    }
    # Offsets depend on the header's length, which depends on the offsets' digits: lay the
    # arrays out after a header padded to a generous fixed size.
    digests = {name: _block_digests(array, block_bytes) for name, array in arrays.items()}
    sketch = json.dumps({**header, "digests": digests}).encode()
    start = _aligned(PREFIX.size + len(sketch) + 512)
    offset = start
    for name, array in arrays.items():
        header["arrays"][name] = {
            "dtype": array.dtype.str,
            "offset": offset,
            "count": int(array.size),
            "digests": digests[name],
        }
        offset = _aligned(offset + array.nbytes)
    body = json.dumps(header, separators=(",", ":"), allow_nan=False).encode()
    if PREFIX.size + len(body) > start:
        raise AssertionError("graph header outgrew its reserved room")  # 512 bytes of slack
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(PREFIX.pack(MAGIC, len(body), hashlib.blake2b(body, digest_size=16).digest()))
            out.write(body)
            for name, array in arrays.items():
                out.seek(header["arrays"][name]["offset"])
                out.write(memoryview(array).cast("B"))
            out.truncate(offset)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)
    return offset


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:  # some filesystems refuse to open a directory; the rename still stands
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class StoredGraph:
    """A graph file mapped into memory; rows are checked against their blocks when read."""

    path: Path
    header: dict[str, Any]
    graph: Graph
    _checked: dict[str, set[int]] = field(
        default_factory=lambda: {"indptr": set(), "indices": set()}
    )

    @property
    def meta(self) -> dict[str, Any]:
        return self.header["meta"]

    def verify(self) -> None:
        """Check every block (reads the whole file)."""
        for name in ("indptr", "indices"):
            array = getattr(self.graph, name)
            self._check(name, 0, array.size)

    def rows(self, start: int, stop: int) -> Graph:
        """Agents start..stop-1 and their neighbour lists, read and checked alone."""
        if not 0 <= start <= stop <= self.graph.nodes:
            raise ValueError(f"rows {start}..{stop} outside 0..{self.graph.nodes}")
        self._check("indptr", start, stop + 1)
        lo, hi = int(self.graph.indptr[start]), int(self.graph.indptr[stop])
        self._check("indices", lo, hi)
        return self.graph.rows(start, stop)

    def _check(self, name: str, first: int, stop: int) -> None:
        """Check the blocks holding items first..stop-1 of array `name` (each block once)."""
        spec = self.header["arrays"][name]
        array = getattr(self.graph, name)
        if stop <= first:
            return
        raw = memoryview(array).cast("B") if array.size else memoryview(b"")
        size, block_bytes = array.itemsize, self.header["block_bytes"]
        for block in range(first * size // block_bytes, (stop * size - 1) // block_bytes + 1):
            if block in self._checked[name]:
                continue
            piece = raw[block * block_bytes : (block + 1) * block_bytes]
            if _digest(piece) != spec["digests"][block]:
                raise GraphFileError(
                    f"{self.path}: block {block} of {name} (bytes "
                    f"{spec['offset'] + block * block_bytes}..) does not match its checksum"
                )
            self._checked[name].add(block)


def open_graph(path: Path, verify: bool = True) -> StoredGraph:
    """Map a graph file. verify=True checks every block now; False checks the header only and
    leaves blocks to be checked as rows are read (what a worker hosting a range wants)."""
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as f:
        prefix = f.read(PREFIX.size)
        if len(prefix) < PREFIX.size or prefix[:8] != MAGIC:
            raise GraphFileError(f"{path}: not a populace graph file (bad magic)")
        _, length, digest = PREFIX.unpack(prefix)
        if length > MAX_HEADER_BYTES or PREFIX.size + length > size:
            raise GraphFileError(f"{path}: header length {length} does not fit the file")
        body = f.read(length)
    if hashlib.blake2b(body, digest_size=16).digest() != digest:
        raise GraphFileError(f"{path}: header does not match its checksum")
    header = json.loads(body)
    if not isinstance(header.get("block_bytes"), int) or header["block_bytes"] < 64:
        raise GraphFileError(f"{path}: header has no valid block size")
    if header.get("format") != FORMAT_VERSION:
        raise GraphFileError(f"{path}: format {header.get('format')} (this reads {FORMAT_VERSION})")
    arrays = {}
    for name in ("indptr", "indices"):
        spec = header["arrays"][name]
        dtype = np.dtype(spec["dtype"])
        if dtype.kind != "i" or dtype.itemsize not in (4, 8):
            raise GraphFileError(f"{path}: {name} has dtype {dtype}, not int32/int64")
        end = spec["offset"] + spec["count"] * dtype.itemsize
        if end > size:
            raise GraphFileError(f"{path}: truncated ({size} bytes, {name} ends at {end})")
        arrays[name] = (
            np.memmap(path, dtype=dtype, mode="r", offset=spec["offset"], shape=(spec["count"],))
            if spec["count"]
            else np.empty(0, dtype=dtype)
        )
    nodes = header["nodes"]
    if arrays["indptr"].size != nodes + 1:
        raise GraphFileError(f"{path}: indptr has {arrays['indptr'].size} entries, not nodes + 1")
    stored = StoredGraph(path=path, header=header, graph=Graph(nodes, **arrays))
    if verify:
        stored.verify()
    return stored
