"""Population graphs at scale: generate, write, read back (whole and a worker's half), stats.

One process, no cluster: what deploy will pay for the graph before any agent moves. Each kind
runs with the parameters BENCHMARKS.md names (mean degree about 10); `edge_list` parses a CSV of
an Erdős–Rényi graph written in memory first (the write is not timed). Prints one JSON line.
"""

from __future__ import annotations

import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from worker_server.graphs.cut import cut_fraction, even_bounds
from worker_server.graphs.generators import generate
from worker_server.graphs.spec import parse_graph_spec
from worker_server.graphs.stats import clustering_estimate, components, degree_stats
from worker_server.graphs.storage import open_graph, write_graph

SPECS = {
    "erdos_renyi": {"kind": "erdos_renyi", "mean_degree": 10},
    "watts_strogatz": {"kind": "watts_strogatz", "k": 10, "p": 0.1},
    "barabasi_albert": {"kind": "barabasi_albert", "m": 5},
    "cliques": {"kind": "cliques", "size": 10},
}
KINDS = (*SPECS, "edge_list")


def _timed(fn, *args, **kwargs):
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, round(time.perf_counter() - start, 3)


def _edge_list_csv(agents: int, seed: int) -> bytes:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    graph = generate(parse_graph_spec(SPECS["erdos_renyi"]), agents, seed)
    rows = np.repeat(np.arange(agents, dtype=np.int64), graph.degrees())
    upper = rows < graph.indices
    table = pa.table({"source": rows[upper], "target": graph.indices[upper].astype(np.int64)})
    sink = pa.BufferOutputStream()
    pacsv.write_csv(table, sink)
    return sink.getvalue().to_pybytes()


def run(kind: str, agents: int, seed: int = 7, parts: int = 2) -> dict:
    result: dict = {"bench": "graph", "kind": kind, "agents": agents, "seed": seed}
    if kind == "edge_list":
        from backend.graphs.edge_list import parse_edge_list

        data = _edge_list_csv(agents, seed)
        spec = parse_graph_spec({"kind": "edge_list", "upload": "bench.csv"})
        parsed, result["parse_s"] = _timed(parse_edge_list, spec, data)
        graph = parsed.graph
        result["csv_bytes"] = len(data)
    else:
        result["spec"] = SPECS[kind]
        graph, result["generate_s"] = _timed(generate, parse_graph_spec(SPECS[kind]), agents, seed)
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "population.graph"
        result["file_bytes"], result["write_s"] = _timed(write_graph, path, graph)
        stored, result["open_verify_s"] = _timed(open_graph, path)
        nodes = graph.nodes  # an edge list's isolated agents are not in the file
        half = nodes // parts
        lazy = open_graph(path, verify=False)
        block, result["read_rows_s"] = _timed(lazy.rows, 0, half)
        assert np.array_equal(block.indices, graph.indices[: graph.indptr[half]])
        result["read_rows"] = half
        stats, result["degree_stats_s"] = _timed(degree_stats, stored.graph)
        result.update(stats)
        result["components"], result["components_s"] = _timed(components, stored.graph)
        clustering, result["clustering_s"] = _timed(clustering_estimate, stored.graph, seed)
        result["clustering"] = clustering and round(clustering["clustering"], 4)
        cut, result["cut_s"] = _timed(cut_fraction, stored.graph, even_bounds(nodes, parts))
        result[f"cut_fraction_{parts}_parts"] = round(cut, 6)
        del stored, lazy
    result["bytes_per_agent"] = round(result["file_bytes"] / agents, 1)
    result["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return result
