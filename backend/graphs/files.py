"""Where the manager keeps population graphs: one file per population under the data dir."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from worker_server.graphs.csr import Graph
from worker_server.graphs.storage import write_graph

SUFFIX = ".graph"


def graphs_dir(data_dir: Path) -> Path:
    return Path(data_dir) / "graphs"


def graph_path(data_dir: Path, population_id: int) -> Path:
    return graphs_dir(data_dir) / f"population-{int(population_id)}{SUFFIX}"


def save_graph(
    data_dir: Path, population_id: int, graph: Graph, meta: dict[str, Any] | None = None
) -> Path:
    """Write a population's graph (atomically: a crash leaves the old file or none)."""
    path = graph_path(data_dir, population_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_graph(path, graph, meta)
    return path


def delete_graph(data_dir: Path, population_id: int) -> bool:
    """Remove a population's graph and any temporary file a crashed write left; idempotent.
    Returns whether the graph file was there."""
    path = graph_path(data_dir, population_id)
    for leftover in path.parent.glob(f".{path.name}.*.tmp"):
        leftover.unlink(missing_ok=True)
    existed = path.exists()
    path.unlink(missing_ok=True)
    return existed
