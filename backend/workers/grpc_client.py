"""The manager's gRPC client for one worker process (management calls only).

Agents go out in columnar batches and decisions come back in packed batches: never one RPC or
one message per agent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from backend.graphs.rows import take_rows, wire_rows
from backend.workers.channels import (
    CHANNEL_OPTIONS,
    MAX_MESSAGE_BYTES,
    WorkerCredentials,
    WorkerDirectory,
    directory,
)
from backend.workers.plane_errors import WorkerStream, translated
from worker_server.graphs.csr import Graph
from worker_server.rpc import worker_pb2 as pb
from worker_server.rpc import worker_pb2_grpc
from worker_server.rpc_auth import bearer

# Kept here too: callers import them from the client.
__all__ = [
    "CHANNEL_OPTIONS",
    "MAX_MESSAGE_BYTES",
    "AgentColumns",
    "AgentMemory",
    "WorkerClient",
    "WorkerCredentials",
]


# Neighbour entries per AgentBatch (4 bytes each on the wire: 64 MiB, well under the message
# limit with the batch's other columns).
GRAPH_ENTRIES_PER_BATCH = 16 * 1024 * 1024


@dataclass
class AgentMemory:
    """What agents remember of one simulation: values[i, j] is agent i's decision in rounds[j]
    (rounds oldest first; NaN: no valid answer). Any object with these three attributes will do
    (simulation_id may be an int: it is sent as its decimal string)."""

    simulation_id: str | int
    rounds: Sequence[int]
    values: np.ndarray  # float64, shape (agents, len(rounds))


@dataclass
class AgentColumns:
    """Agents of one population as columns: ids[i] has categories[name][codes[name][i]],
    (optionally) memory.values[i] is what agent ids[i] remembers, and (for a population with a
    graph) graph row i lists agent ids[i]'s neighbours by number (a CSR block aligned with
    ids: graph.nodes == len(ids))."""

    population_id: str
    ids: np.ndarray
    codes: dict[str, np.ndarray] = field(default_factory=dict)
    categories: dict[str, list[str]] = field(default_factory=dict)
    personas: list[str] | None = None
    # Set when agents move to a worker mid-simulation (re-placed, restored).
    memory: AgentMemory | None = None
    graph: Graph | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def take(self, index: np.ndarray | slice) -> AgentColumns:
        memory = None
        if self.memory is not None:
            memory = AgentMemory(
                self.memory.simulation_id,
                self.memory.rounds,
                _memory_values(self.memory, len(self.ids))[index],
            )
        return AgentColumns(
            self.population_id,
            self.ids[index],
            {name: codes[index] for name, codes in self.codes.items()},
            self.categories,
            None if self.personas is None else list(np.asarray(self.personas, dtype=object)[index]),
            memory,
            None if self.graph is None else take_rows(self.graph, index),
        )

    def batches(self, size: int) -> Iterable[pb.AgentBatch]:
        values = None if self.memory is None else _memory_values(self.memory, len(self.ids))
        if self.graph is not None and self.graph.nodes != len(self.ids):
            raise ValueError(f"graph has {self.graph.nodes} rows, ids has {len(self.ids)} agents")
        for start, stop in self._bounds(size):
            part = slice(start, stop)
            batch = pb.AgentBatch(
                population_id=self.population_id,
                agent_ids=self.ids[part].tolist(),
                attributes=[
                    pb.AttributeColumn(
                        name=name, categories=self.categories[name], codes=codes[part].tolist()
                    )
                    for name, codes in self.codes.items()
                ],
                personas=[] if self.personas is None else self.personas[part],
            )
            if values is not None:
                # values[i * len(rounds) + j]: agent i's decision in rounds[j] (row-major).
                batch.memory.simulation_id = str(self.memory.simulation_id)
                batch.memory.rounds.extend(int(r) for r in self.memory.rounds)
                batch.memory.values.extend(values[part].ravel().tolist())
            if self.graph is not None:
                batch.graph.offsets, batch.graph.neighbours = wire_rows(self.graph, start, stop)
            yield batch

    def _bounds(self, size: int) -> Iterator[tuple[int, int]]:
        """(start, stop) of each batch: at most `size` agents, and with a graph at most
        GRAPH_ENTRIES_PER_BATCH neighbour entries (a dense graph, e.g. a clique of 10^4, has
        10^4 entries an agent: by agents alone one batch would pass gRPC's message limit). A
        batch holds at least one agent."""
        n = len(self.ids)
        start = 0
        while start < n:
            stop = min(start + size, n)
            if self.graph is not None:
                indptr = self.graph.indptr
                budget = int(indptr[start]) + GRAPH_ENTRIES_PER_BATCH
                fits = int(np.searchsorted(indptr[start + 1 : stop + 1], budget, side="right"))
                stop = start + max(1, fits)
            yield start, stop
            start = stop


def _memory_values(memory: AgentMemory, n: int) -> np.ndarray:
    """memory.values as a float64 (n, len(rounds)) array; ValueError when the shape is off."""
    values = np.asarray(memory.values, dtype=np.float64)
    expected = (n, len(memory.rounds))
    if values.shape != expected:
        raise ValueError(f"memory.values has shape {values.shape}, expected {expected}")
    return values


class WorkerClient:
    """One channel to one worker process; use as an async context manager.

    Every call carries the worker's secret. The credentials come from the manager's directory
    (filled at registration) unless given; a worker it holds none for refuses every call
    (UNAUTHENTICATED), as it should. A failed call raises its worker-plane error
    (backend.workers.plane_errors), never a bare gRPC one.
    """

    def __init__(
        self,
        address: str,
        credentials: WorkerCredentials | None = None,
        *,
        workers: WorkerDirectory = directory,
    ) -> None:
        self.address = address
        credentials = credentials or workers.credentials(address)
        self._metadata = bearer(credentials.secret) if credentials else ()
        self._channel = workers.channel(address, tls=bool(credentials and credentials.tls))
        self.stub = worker_pb2_grpc.WorkerServiceStub(self._channel)

    async def __aenter__(self) -> WorkerClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()

    async def info(self, timeout: float = 10.0) -> pb.WorkerInfo:
        with translated(self.address):
            return await self.stub.GetInfo(
                pb.GetInfoRequest(), timeout=timeout, metadata=self._metadata
            )

    async def create_agents(
        self, agents: AgentColumns, batch_size: int = 50_000, timeout: float | None = None
    ) -> pb.CreateAgentsReply:
        async def stream() -> AsyncIterator[pb.AgentBatch]:
            for batch in agents.batches(batch_size):
                yield batch

        with translated(self.address):
            return await self.stub.CreateAgents(stream(), timeout=timeout, metadata=self._metadata)

    async def delete_agents(
        self,
        *,
        population_id: str | None = None,
        ids: Iterable[int] | None = None,
        all: bool = False,
        timeout: float = 60.0,
    ) -> pb.DeleteAgentsReply:
        if all:
            request = pb.DeleteAgentsRequest(all=True)
        elif ids is not None:
            request = pb.DeleteAgentsRequest(ids=pb.AgentIds(ids=list(ids)))
        elif population_id:
            request = pb.DeleteAgentsRequest(population_id=population_id)
        else:
            raise ValueError("say what to delete: population_id, ids or all=True")
        with translated(self.address):
            return await self.stub.DeleteAgents(request, timeout=timeout, metadata=self._metadata)

    async def list_agents(
        self,
        population_id: str = "",
        *,
        after: int | None = None,
        limit: int = 1000,
        timeout: float = 30.0,
    ) -> pb.ListAgentsReply:
        """One page of the agents hosted here (all populations when population_id is empty),
        those with ids above `after` when given."""
        request = pb.ListAgentsRequest(population_id=population_id, after_id=after, limit=limit)
        with translated(self.address):
            return await self.stub.ListAgents(request, timeout=timeout, metadata=self._metadata)

    def run_round(self, request: pb.RunRoundRequest, timeout: float | None = None):
        """The server stream: DecisionBatch messages, then one PartialAggregate."""
        return WorkerStream(
            self.address,
            self.stub.RunRound(request, timeout=timeout, metadata=self._metadata),
        )

    async def cancel_round(self, round_id: str, timeout: float = 10.0) -> bool:
        with translated(self.address):
            reply = await self.stub.CancelRound(
                pb.CancelRoundRequest(round_id=round_id), timeout=timeout, metadata=self._metadata
            )
        return reply.cancelled

    async def probe_llm(
        self, endpoints: Iterable[pb.LlmEndpoint], timeout_s: float = 5.0, check_only: bool = False
    ) -> pb.ProbeLlmReply:
        """Ask the worker whether it can reach each LLM endpoint (and that it serves its model);
        `check_only`: only whether it would call them (allowed hosts, API key variables)."""
        request = pb.ProbeLlmRequest(
            endpoints=list(endpoints), timeout_s=timeout_s, check_only=check_only
        )
        with translated(self.address):
            return await self.stub.ProbeLlm(
                request, timeout=timeout_s + 10.0, metadata=self._metadata
            )

    async def generate_personas(
        self, request: pb.GeneratePersonasRequest, timeout: float | None = None
    ) -> pb.GeneratePersonasReply:
        """Have the worker write personas for a slice of a population (falls back per agent)."""
        with translated(self.address):
            return await self.stub.GeneratePersonas(
                request, timeout=timeout, metadata=self._metadata
            )

    def interview(self, request: pb.InterviewRequest, timeout: float | None = None):
        """The server stream: InterviewChunk text deltas, then one with done set (read() gives
        None after it)."""
        return WorkerStream(
            self.address,
            self.stub.Interview(request, timeout=timeout, metadata=self._metadata),
        )

    async def recent_logs(
        self, *, limit: int, min_level: int = 0, after: int = 0, timeout: float = 5.0
    ) -> pb.RecentLogsReply:
        """The worker's last log lines (its in-memory ring), oldest first."""
        request = pb.RecentLogsRequest(limit=limit, min_level=min_level, after_sequence=after)
        with translated(self.address):
            return await self.stub.RecentLogs(request, timeout=timeout, metadata=self._metadata)

    async def seed_values(
        self, request: pb.SeedValuesRequest, timeout: float = 120.0
    ) -> pb.SeedValuesReply:
        """A network simulation's values of agents that moved to this process."""
        with translated(self.address):
            return await self.stub.SeedValues(request, timeout=timeout, metadata=self._metadata)
