"""The graph file: round trip, atomic writes, range reads, and corruption caught where read."""

from __future__ import annotations

import numpy as np
import pytest

from backend.graphs.files import delete_graph, graph_path, save_graph
from worker_server.graphs.csr import Graph
from worker_server.graphs.generators import generate
from worker_server.graphs.spec import parse_graph_spec
from worker_server.graphs.storage import PREFIX, GraphFileError, open_graph, write_graph


@pytest.fixture
def graph() -> Graph:
    return generate(parse_graph_spec({"kind": "barabasi_albert", "m": 3}), 3000, 5)


def test_round_trip_is_exact_and_memory_mapped(tmp_path, graph):
    path = tmp_path / "g.graph"
    size = write_graph(path, graph, {"kind": "barabasi_albert", "seed": "5"})
    assert path.stat().st_size == size
    stored = open_graph(path)
    assert isinstance(stored.graph.indices, np.memmap)
    assert stored.graph.nodes == graph.nodes and stored.graph.edges == graph.edges
    assert np.array_equal(stored.graph.indptr, graph.indptr)
    assert np.array_equal(stored.graph.indices, graph.indices)
    assert stored.graph.indices.dtype == np.int32
    assert stored.meta == {"kind": "barabasi_albert", "seed": "5"}
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left


@pytest.mark.parametrize(("start", "stop"), [(0, 3000), (0, 1), (1234, 2345), (2999, 3000), (7, 7)])
def test_range_rows_equal_the_full_graphs_rows(tmp_path, graph, start, stop):
    write_graph(tmp_path / "g", graph, block_bytes=256)
    block = open_graph(tmp_path / "g", verify=False).rows(start, stop)
    assert block.nodes == stop - start
    assert block.indptr[0] == 0
    for row in (0, (stop - start) // 2, stop - start - 1):
        if 0 <= row < block.nodes:
            local = block.indices[block.indptr[row] : block.indptr[row + 1]]
            assert np.array_equal(local, graph.neighbours(start + row))
    assert np.array_equal(block.indices, graph.indices[graph.indptr[start] : graph.indptr[stop]])


def test_out_of_range_rows_are_refused(tmp_path, graph):
    write_graph(tmp_path / "g", graph)
    with pytest.raises(ValueError, match="outside 0..3000"):
        open_graph(tmp_path / "g").rows(10, 3001)


def _flip(path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_corrupt_block_is_caught_by_full_verify_and_by_rows_that_read_it(tmp_path, graph):
    path = tmp_path / "g"
    write_graph(path, graph, block_bytes=1024)
    header = open_graph(path).header
    indices = header["arrays"]["indices"]
    last_row_entry = int(graph.indptr[-2])  # the last agent's first neighbour
    _flip(path, indices["offset"] + last_row_entry * 4)
    with pytest.raises(GraphFileError, match="of indices .* does not match its checksum"):
        open_graph(path)
    lazily = open_graph(path, verify=False)
    first_rows = lazily.rows(0, 10)  # blocks far from the damage still read
    assert np.array_equal(first_rows.indices, graph.indices[: graph.indptr[10]])
    with pytest.raises(GraphFileError, match="does not match its checksum"):
        lazily.rows(2990, 3000)


def test_a_corrupt_header_truncation_or_foreign_file_is_named(tmp_path, graph):
    path = tmp_path / "g"
    write_graph(path, graph)
    _flip(path, PREFIX.size + 5)
    with pytest.raises(GraphFileError, match="header does not match its checksum"):
        open_graph(path)
    write_graph(path, graph)
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(GraphFileError, match="truncated"):
        open_graph(path)
    path.write_bytes(b"source,target\n1,2\n" * 10)
    with pytest.raises(GraphFileError, match="not a populace graph file"):
        open_graph(path)


def test_a_rewrite_replaces_the_file_whole(tmp_path, graph):
    path = tmp_path / "g"
    write_graph(path, graph)
    reader = open_graph(path)  # mapped before the rewrite: keeps the old file's bytes
    other = generate(parse_graph_spec({"kind": "cliques", "size": 3}), 3000, 0)
    write_graph(path, other)
    assert np.array_equal(reader.graph.indices, graph.indices)
    assert open_graph(path).graph.edges == other.edges


def test_empty_graph_round_trips(tmp_path):
    empty = Graph(5, np.zeros(6, dtype=np.int64), np.empty(0, dtype=np.int32))
    write_graph(tmp_path / "g", empty)
    stored = open_graph(tmp_path / "g")
    assert stored.graph.edges == 0 and stored.rows(0, 5).indices.size == 0


def test_manager_files_live_under_the_data_dir_and_delete_idempotently(tmp_path, graph):
    path = save_graph(tmp_path, 42, graph, {"seed": "5"})
    assert path == graph_path(tmp_path, 42) == tmp_path / "graphs" / "population-42.graph"
    leftover = path.with_name(f".{path.name}.999.tmp")
    leftover.write_bytes(b"half a write")
    assert delete_graph(tmp_path, 42) is True
    assert not path.exists() and not leftover.exists()
    assert delete_graph(tmp_path, 42) is False
