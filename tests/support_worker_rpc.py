"""A worker process over raw gRPC: a population of 10^4 agents dealt to workers by id parity,
stubs of the online workers, agents listed page by page, a round streamed to its aggregate."""

from __future__ import annotations

import grpc
import numpy as np
import pytest

from tests.support import WithWorkerSecret
from worker_server.rpc import worker_pb2 as pb
from worker_server.rpc import worker_pb2_grpc

N = 10_000
EDUCATION = ["primary school", "high school", "bachelor", "master", "doctorate"]
OCCUPATION = ["farmer", "teacher", "engineer", "professor of game theory"]
RULE = pb.GameRule(ratio=2 / 3, offset=0, min=0, max=100)
OPTIONS = [("grpc.max_receive_message_length", 64 << 20)]


def all_online(manager, n):
    workers = [w for w in manager.workers() if w["state"] == "online"]
    return sorted(workers, key=lambda w: w["id"]) if len(workers) == n else None


def stubs_of(workers):
    channels = [grpc.insecure_channel(w["address"], options=OPTIONS) for w in workers]
    authed = [grpc.intercept_channel(c, WithWorkerSecret()) for c in channels]
    return channels, [worker_pb2_grpc.WorkerServiceStub(c) for c in authed]


class Population:
    """10^4 agents with two attributes and personas, dealt to workers by id parity."""

    def __init__(self, population_id: str, n: int = N, first_id: int = 1) -> None:
        rng = np.random.default_rng(5)
        self.population_id = population_id
        self.ids = np.arange(first_id, first_id + 3 * n, 3, dtype=np.int64)
        self.education = rng.integers(0, len(EDUCATION), n)
        self.occupation = rng.integers(0, len(OCCUPATION), n)

    def part(self, k: int, of: int) -> np.ndarray:
        return np.flatnonzero(np.arange(len(self.ids)) % of == k)

    def persona(self, i: int) -> str:
        return f"Agent {self.ids[i]}: a {OCCUPATION[self.occupation[i]]} ({EDUCATION[self.education[i]]})"

    def batches(self, rows: np.ndarray, size: int = 2000):
        for start in range(0, len(rows), size):
            part = rows[start : start + size]
            yield pb.AgentBatch(
                population_id=self.population_id,
                agent_ids=self.ids[part].tolist(),
                attributes=[
                    pb.AttributeColumn(
                        name="education", categories=EDUCATION, codes=self.education[part].tolist()
                    ),
                    pb.AttributeColumn(
                        name="occupation",
                        categories=OCCUPATION,
                        codes=self.occupation[part].tolist(),
                    ),
                ],
                personas=[self.persona(i) for i in part.tolist()],
            )

    def deploy(self, stubs) -> list[pb.CreateAgentsReply]:
        return [
            stub.CreateAgents(self.batches(self.part(k, len(stubs))), timeout=30)
            for k, stub in enumerate(stubs)
        ]


def list_all(stub, population_id="", limit=997):
    agents, after = [], None
    while True:
        request = pb.ListAgentsRequest(population_id=population_id, limit=limit)
        if after is not None:
            request.after_id = after
        reply = stub.ListAgents(request, timeout=10)
        agents += list(reply.agents)
        assert len(reply.agents) <= limit
        if not reply.HasField("next_after_id"):
            return agents
        after = reply.next_after_id
        assert after == reply.agents[-1].id


def run_round(stub, request, timeout=30):
    ids, values, late, invalid, aggregates = [], [], [], [], []
    for message in stub.RunRound(request, timeout=timeout):
        if message.WhichOneof("body") == "decisions":
            assert not aggregates, "decisions never follow the aggregate"
            batch = message.decisions
            assert len(batch.agent_ids) <= max(request.batch_size, 10_000)
            ids.append(np.asarray(batch.agent_ids, dtype=np.int64))
            values.append(np.asarray(batch.values, dtype=np.float64))
            late += list(batch.late_ids)
            invalid += list(batch.invalid_ids)
        else:
            aggregates.append(message.aggregate)
    assert len(aggregates) == 1, "exactly one aggregate ends the stream"
    return np.concatenate(ids), np.concatenate(values), aggregates[0], late, invalid


def status_of(call) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as info:
        call()
    return info.value
