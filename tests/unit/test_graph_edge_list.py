"""Uploaded edge lists: id orders, node attributes, and errors naming the line and column."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from backend.graphs.edge_list import EdgeListError, parse_edge_list
from worker_server.graphs.csr import check_simple
from worker_server.graphs.spec import parse_graph_spec

CSV = b"source,target\n30,10\n10,20\n20,30\n40,10\n"


def _spec(**fields):
    return parse_graph_spec({"kind": "edge_list", "upload": "net.csv", **fields})


def _error(spec, data, nodes=None) -> EdgeListError:
    with pytest.raises(EdgeListError) as caught:
        parse_edge_list(spec, data, nodes)
    return caught.value


def test_sorted_order_maps_ascending_ids_whatever_the_row_order():
    parsed = parse_edge_list(_spec(), CSV)
    assert parsed.ids.to_pylist() == [10, 20, 30, 40]
    check_simple(parsed.graph)
    assert parsed.graph.neighbours(0).tolist() == [1, 2, 3]  # 10 knows 20, 30, 40
    shuffled = b"source,target\n40,10\n20,30\n10,20\n30,10\n"
    again = parse_edge_list(_spec(), shuffled)
    assert np.array_equal(again.graph.indices, parsed.graph.indices)


def test_first_seen_order_reads_row_by_row_source_first():
    parsed = parse_edge_list(_spec(order="first_seen"), CSV)
    assert parsed.ids.to_pylist() == [30, 10, 20, 40]
    assert parsed.graph.neighbours(3).tolist() == [1]  # 40 knows only 10


def test_text_ids_and_custom_columns():
    data = b"from,to\nann,bob\nbob,cy\n"
    parsed = parse_edge_list(_spec(source="from", target="to"), data)
    assert parsed.ids.to_pylist() == ["ann", "bob", "cy"]
    assert parsed.graph.edges == 2


def test_parquet_is_read_by_its_magic():
    buffer = io.BytesIO()
    pq.write_table(pa.table({"source": [1, 2], "target": [2, 3]}), buffer)
    parsed = parse_edge_list(_spec(), buffer.getvalue())
    assert parsed.graph.edges == 2 and parsed.rows == 2


def test_node_attributes_join_by_id_and_keep_isolated_nodes():
    nodes = b"id,age,town\n40,61,b\n10,30,a\n20,45,a\n30,52,b\n50,19,c\n"
    parsed = parse_edge_list(_spec(nodes={"upload": "nodes.csv"}), CSV, nodes)
    assert parsed.ids.to_pylist() == [10, 20, 30, 40, 50]
    assert parsed.attributes.column("age").to_pylist() == [30, 45, 52, 61, 19]
    assert parsed.graph.degrees().tolist() == [3, 2, 2, 1, 0]
    in_file_order = parse_edge_list(
        _spec(order="first_seen", nodes={"upload": "nodes.csv"}), CSV, nodes
    )
    assert in_file_order.ids.to_pylist() == [40, 10, 20, 30, 50]


def test_duplicates_in_either_direction_are_refused_with_lines_or_merged():
    data = b"source,target\n1,2\n2,3\n2,1\n1,2\n"
    error = _error(_spec(), data)
    assert error.loc == ("upload",)
    assert "2 duplicate edges" in error.message
    assert "lines 4, 5" in error.message and "repeating lines 2, 2" in error.message
    merged = parse_edge_list(_spec(duplicates="merge"), data)
    assert merged.graph.edges == 2


def test_self_loops_name_their_lines():
    error = _error(_spec(), b"source,target\n1,2\n3,3\n4,4\n")
    assert "2 self-loops" in error.message and "lines 3, 4" in error.message


def test_missing_and_empty_cells_and_bad_types_name_the_column():
    assert "no column 'source'" in _error(_spec(), b"src,target\n1,2\n").message
    empty = _error(_spec(), b"source,target\n1,2\n3,\n").message
    assert "column 'target' is empty in 1 rows: line 3" in empty
    assert "column 'source' holds double" in _error(_spec(), b"source,target\n1.5,2\n").message


def test_many_offenders_show_the_first_five_and_the_count():
    data = b"source,target\n" + b"".join(b"%d,%d\n" % (i, i) for i in range(12))
    error = _error(_spec(), data)
    assert "12 self-loops" in error.message
    assert "lines 2, 3, 4, 5, 6 (first 5 shown)" in error.message


def test_node_table_errors():
    spec = _spec(nodes={"upload": "nodes.csv"})
    unknown = _error(spec, CSV, b"id\n10\n20\n30\n")
    assert unknown.loc == ("upload",)
    assert "1 ids in the edge list are not in the node table's column 'id': line 5" in (
        unknown.message
    )
    repeated = _error(spec, CSV, b"id\n10\n20\n10\n30\n40\n")
    assert repeated.loc == ("nodes", "upload")
    assert "1 node ids appear more than once" in repeated.message and "line 4" in repeated.message
    assert _error(spec, CSV).loc == ("nodes", "upload")  # not uploaded


def test_unreadable_and_empty_files():
    parquet_spec = _spec(format="parquet")
    assert "cannot read the file as parquet" in _error(parquet_spec, CSV).message
    assert "no rows" in _error(_spec(), b"source,target\n").message
