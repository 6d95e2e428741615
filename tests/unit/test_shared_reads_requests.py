"""The manager tells an LLM round's processes about each other only when its agents may draw
from read distributions (backend.rounds.shared_reads), with each process's peer credential."""

from __future__ import annotations

import backend.rounds.shared_reads as shared_reads
from backend.rounds.shared_reads import may_read, with_shared_reads
from backend.workers.channels import WorkerCredentials, WorkerDirectory
from worker_server.rounds.network import peer_credential
from worker_server.rpc import worker_pb2 as pb

ADDRESSES = ("127.0.0.1:7002", "127.0.0.1:7001")


def llm(**fields) -> pb.Policy:
    settings = {"api": "completions", "answer_mode": "basic", "temperature": 0.7}
    settings.update(fields)
    return pb.Policy(llm=pb.LlmPolicy(**settings))


def requests_for(policy: pb.Policy, addresses=ADDRESSES) -> dict[str, pb.RunRoundRequest]:
    return {a: pb.RunRoundRequest(round_id="r", policy=policy) for a in addresses}


def test_only_sampled_basic_completions_may_read():
    assert may_read(llm())
    assert not may_read(llm(temperature=0))  # shared answers, no reads
    assert not may_read(llm(api="chat"))
    assert not may_read(llm(answer_mode="cot"))
    assert not may_read(llm(each_agent_asks=True))
    assert not may_read(pb.Policy(synthetic=pb.SyntheticPolicy()))
    mixed = pb.MixedPolicy(parts=[pb.MixedPart(label="a", policy=llm(), bound=10)])
    assert may_read(pb.Policy(mixed=mixed))


def test_each_process_is_told_the_others_in_address_order_and_which_one_it_is(monkeypatch):
    directory = WorkerDirectory()  # the manager's, as registrations fill it
    monkeypatch.setattr(shared_reads, "directory", directory)
    for i, address in enumerate(ADDRESSES):
        directory.remember(address, WorkerCredentials(f"secret-{i}"))
    out = with_shared_reads(requests_for(llm()))
    ordered = sorted(ADDRESSES)
    for address, request in out.items():
        reads = request.shared_reads
        assert [p.address for p in reads.peers] == ordered
        assert reads.peers[reads.self].address == address
        for peer in reads.peers:
            secret = f"secret-{ADDRESSES.index(peer.address)}"
            assert peer.credential == peer_credential(secret) != secret
    # One process, or agents that never read: nothing added.
    assert not with_shared_reads(requests_for(llm(temperature=0)))[ADDRESSES[0]].HasField(
        "shared_reads"
    )
    alone = with_shared_reads(requests_for(llm(), ADDRESSES[:1]))
    assert not alone[ADDRESSES[0]].HasField("shared_reads")
    # A process whose credentials the manager does not hold: each reads for itself.
    unknown = requests_for(llm(), (*ADDRESSES, "127.0.0.1:7999"))
    assert not any(r.HasField("shared_reads") for r in with_shared_reads(unknown).values())
