"""Exchangeable agents over two real worker processes: each prompt's answer distribution is read
once for the cluster, by the process that owns the prompt, and every agent draws what it would
draw on one process. The LLM is bench.openai_server checking requests as the pinned vLLM does."""

from __future__ import annotations

import numpy as np
import pytest

from backend.rounds.fanout import run_round
from backend.workers.grpc_client import AgentColumns
from bench.openai_server import OpenAIServer, default_answer
from tests.support import (
    WORKER_RPC_SECRET,
    free_port,
    stop_process,
    wait_for,
    worker_client,
    worker_metadata,
)
from tests.support_worker_llm import MODEL, Batches, batched_policy, round_request
from worker_server.llm.shared_reads import prompt_digest
from worker_server.rounds.network import peer_credential
from worker_server.rpc import worker_pb2 as pb
from worker_server.rpc import worker_pb2_grpc

SYSTEM = "You pick numbers."
USER = "Pick a number. Answer:"
AGENTS = 300


@pytest.fixture(scope="module")
def two_workers(shared_manager):
    """(worker id, address) of two real worker processes, in worker id order."""
    proc = shared_manager.start_workers(procs=2)
    try:
        online = wait_for(
            lambda: (
                (w := [w for w in shared_manager.workers() if w["state"] == "online"])
                and len(w) == 2
                and w
            ),
            timeout=30,
            what="two workers online",
        )
        yield sorted((w["id"], w["address"]) for w in online)
    finally:
        stop_process(proc)


@pytest.fixture
def vllm():
    with OpenAIServer(model=MODEL, answer=default_answer, validate="vllm") as running:
        yield running


def columns(population_id: str, ids: np.ndarray) -> AgentColumns:
    return AgentColumns(population_id=population_id, ids=ids, personas=[""] * len(ids))


def tree_reads(server) -> list:
    return [r for r in server.records if r.body.get("max_tokens") == 1]


def generations(server) -> list:
    return [r for r in server.records if r.body.get("max_tokens") != 1]


def policy(server) -> pb.Policy:
    return batched_policy(server, 1, system_template=SYSTEM, user_template=USER, temperature=1.0)


def peers(workers, addresses=None) -> list[pb.Peer]:
    addresses = addresses or [address for _, address in workers]
    return [
        pb.Peer(worker_id=worker, address=address, credential=peer_credential(WORKER_RPC_SECRET))
        for (worker, _), address in zip(workers, addresses, strict=True)
    ]


def request_for(population: AgentColumns, server, simulation_id: str) -> pb.RunRoundRequest:
    request = round_request(population, policy(server), simulation_id=simulation_id)
    del request.segment_by[:]  # these agents have no attributes
    return request


async def play_on(clients, requests) -> Batches:
    batches = Batches()
    result = await run_round(clients, requests, on_decisions=batches)
    assert sum(p.count for p in result.partials.values()) == AGENTS
    return batches


async def test_two_processes_read_a_prompt_once_and_draw_what_one_process_draws(two_workers, vllm):
    ids = np.arange(1, AGENTS + 1, dtype=np.int64) * 3
    (_, first), (_, second) = two_workers
    async with worker_client(first) as a, worker_client(second) as b:
        population = columns("shared-reads-two", ids)
        await a.create_agents(columns(population.population_id, ids[: AGENTS // 2]))
        await b.create_agents(columns(population.population_id, ids[AGENTS // 2 :]))
        requests = {}
        for index, client in enumerate((a, b)):
            request = request_for(population, vllm, "two")
            request.shared_reads.CopyFrom(pb.SharedReads(peers=peers(two_workers), self=index))
            requests[client.address] = request
        try:
            two = await play_on([a, b], requests)
        finally:
            await a.delete_agents(all=True)
            await b.delete_agents(all=True)
        reads = tree_reads(vllm)
        assert not generations(vllm), "a prompt 300 agents share is read, never asked"
        prefixes = [r.body["prompt"] for r in reads]
        assert reads and len(set(prefixes)) == len(prefixes), "one read: no prefix asked twice"

        # The same agents on one process: the same read, and every agent the same answer.
        vllm.reset()
        await a.create_agents(population)
        try:
            one = await play_on([a], {a.address: request_for(population, vllm, "one")})
        finally:
            await a.delete_agents(all=True)
        assert sorted(r.body["prompt"] for r in tree_reads(vllm)) == sorted(prefixes)
        assert len(two.decided) == AGENTS and two.decided == one.decided
        assert len(set(two.decided.values())) > 1, "each agent drew with its own uniform"


async def test_an_owner_out_of_reach_leaves_the_read_to_the_asker(two_workers, vllm):
    ids = np.arange(1, 51, dtype=np.int64)
    (worker, address), _ = two_workers
    owner = int.from_bytes(prompt_digest(MODEL, SYSTEM, USER)[:8], "little") % 2
    own = 1 - owner
    addresses = [address, address]
    addresses[owner] = f"127.0.0.1:{free_port()}"  # nothing listens there
    async with worker_client(address) as a:
        population = columns("shared-reads-gone", ids)
        await a.create_agents(population)
        request = request_for(population, vllm, "gone")
        request.shared_reads.CopyFrom(pb.SharedReads(peers=peers(two_workers, addresses), self=own))
        try:
            batches = Batches()
            result = await run_round([a], {a.address: request}, on_decisions=batches)
        finally:
            await a.delete_agents(all=True)
    (partial,) = result.partials.values()
    assert partial.count == 50 and partial.n_invalid == 0 and partial.n_late == 0
    assert tree_reads(vllm) and not generations(vllm)


async def test_a_bad_read_request_is_refused_naming_the_field(two_workers):
    import grpc

    (_, address), _ = two_workers
    async with grpc.aio.insecure_channel(address) as channel:
        stub = worker_pb2_grpc.WorkerServiceStub(channel)
        peer = (("authorization", f"Bearer {peer_credential(WORKER_RPC_SECRET)}"),)
        too_long = pb.ReadDistributionRequest(
            simulation_id="s", round=1, model=MODEL, user="x" * 10**6
        )
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.ReadDistribution(too_long, metadata=peer)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "system and user" in refused.value.details()
        # The peer credential opens the peer plane only; a wrong one opens nothing.
        with pytest.raises(grpc.aio.AioRpcError) as other:
            await stub.GetInfo(pb.GetInfoRequest(), metadata=peer)
        assert other.value.code() == grpc.StatusCode.UNAUTHENTICATED
        wrong = (("authorization", f"Bearer {peer_credential('another secret')}"),)
        with pytest.raises(grpc.aio.AioRpcError) as unknown:
            await stub.ReadDistribution(too_long, metadata=wrong)
        assert unknown.value.code() == grpc.StatusCode.UNAUTHENTICATED
        # With the process's own secret every call is open.
        info = await stub.GetInfo(pb.GetInfoRequest(), metadata=worker_metadata())
        assert info.address == address


async def test_an_owner_with_no_agent_in_the_round_sends_the_asker_back_at_once(two_workers, vllm):
    """The prompt's owner hosts none of the population (a retry of a few agents, say): it never
    opens the round, and once its part of the round is over it says so, so the asker reads
    itself well within the round's deadline instead of waiting out the owner's grace period."""
    ids = np.arange(1, 51, dtype=np.int64)
    (_, first), (_, second) = two_workers
    owner = int.from_bytes(prompt_digest(MODEL, SYSTEM, USER)[:8], "little") % 2
    addresses = [first, first]
    addresses[owner] = second  # the owner: the process hosting none of the agents
    async with worker_client(first) as a, worker_client(second) as b:
        population = columns("shared-reads-empty-owner", ids)
        await a.create_agents(population)
        requests = {}
        for client in (a, b):
            request = request_for(population, vllm, "empty-owner")
            request.deadline_s = 20  # the owner's grace period (30 s) would run past it
            peers_now = peers(two_workers, addresses)
            index = addresses.index(client.address)
            request.shared_reads.CopyFrom(pb.SharedReads(peers=peers_now, self=index))
            requests[client.address] = request
        try:
            batches = Batches()
            result = await run_round([a, b], requests, on_decisions=batches)
        finally:
            await a.delete_agents(all=True)
    counts = {address: p.count for address, p in result.partials.items()}
    assert counts == {first: 50, second: 0}
    assert sum(p.n_late for p in result.partials.values()) == 0
    assert len(batches.decided) == 50 and tree_reads(vllm) and not generations(vllm)
