"""AgentColumns.batches: a share of agents goes to a worker in batches of at most `size` agents
and, with a graph, at most GRAPH_ENTRIES_PER_BATCH neighbour entries (a dense graph would pass
gRPC's message limit by agents alone); the batches carry every agent and row exactly once."""

from __future__ import annotations

import numpy as np
import pytest

from backend.workers import grpc_client
from backend.workers.grpc_client import AgentColumns
from worker_server.graphs.csr import Graph


def _graph(degrees: list[int]) -> Graph:
    indptr = np.concatenate([[0], np.cumsum(degrees)]).astype(np.int64)
    indices = (np.arange(int(indptr[-1])) % 1000).astype(np.int32)
    return Graph(len(degrees), indptr, indices)


def _sent(columns: AgentColumns, size: int) -> list[tuple[list[int], np.ndarray, np.ndarray]]:
    out = []
    for batch in columns.batches(size):
        offsets = np.frombuffer(batch.graph.offsets, dtype="<i8")
        numbers = np.frombuffer(batch.graph.neighbours, dtype="<i4")
        assert offsets[0] == 0 and offsets[-1] == len(numbers)
        assert len(offsets) == len(batch.agent_ids) + 1
        out.append((list(batch.agent_ids), offsets, numbers))
    return out


@pytest.mark.parametrize(
    "degrees,budget,size,agents_per_batch",
    [
        ([49] * 200, 120, 40, [2] * 100),  # a dense graph: the entries cut first
        ([3] * 100, 10_000, 40, [40, 40, 20]),  # a sparse one: the agents cut first
        ([5, 500, 5, 5], 100, 40, [1, 1, 2]),  # one agent over the budget goes alone
    ],
)
def test_batches_cut_by_agents_and_by_neighbour_entries(
    monkeypatch, degrees, budget, size, agents_per_batch
):
    monkeypatch.setattr(grpc_client, "GRAPH_ENTRIES_PER_BATCH", budget)
    graph = _graph(degrees)
    ids = np.arange(len(degrees), dtype=np.int64) + (7 << 32)
    sent = _sent(AgentColumns("7", ids, graph=graph), size)
    assert [len(agents) for agents, _, _ in sent] == agents_per_batch
    for agents, _offsets, numbers in sent:
        assert len(numbers) <= budget or len(agents) == 1
    # Every agent once, in order, with its own neighbour row.
    assert [a for agents, _, _ in sent for a in agents] == ids.tolist()
    assert np.concatenate([numbers for _, _, numbers in sent]).tolist() == graph.indices.tolist()
    degree = np.concatenate([np.diff(offsets) for _, offsets, _ in sent])
    assert degree.tolist() == degrees


def test_batches_without_a_graph_cut_by_agents_only():
    ids = np.arange(95, dtype=np.int64)
    batches = list(AgentColumns("1", ids).batches(40))
    assert [len(b.agent_ids) for b in batches] == [40, 40, 15]
    assert not any(b.HasField("graph") for b in batches)
