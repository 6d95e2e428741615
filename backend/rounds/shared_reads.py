"""The round's processes, told to each of them so that exchangeable LLM agents' answer
distributions are read once for the whole cluster (worker_server.llm.shared_reads): each
process learns the others' addresses and the peer credential each accepts."""

from __future__ import annotations

from collections.abc import Mapping

from backend.workers.channels import directory
from worker_server.llm.accounting import readable as readable_answers
from worker_server.rounds.network import peer_credential
from worker_server.rpc import worker_pb2 as pb


def may_read(policy: pb.Policy) -> bool:
    """Whether the policy's agents may draw from read distributions: an LLM sampled above
    temperature 0 with basic answers over completions, identical prompts shared
    (worker_server.llm.accounting.answering_mode decides on the worker). Only then are the
    peers worth sending: the list grows with the processes, in every request."""
    kind = policy.WhichOneof("kind")
    if kind == "mixed":
        return any(may_read(part.policy) for part in policy.mixed.parts)
    if kind != "llm":
        return False
    llm = policy.llm
    readable = readable_answers(llm.api, llm.answer_mode, spelled_by_top_tokens=True)
    return llm.temperature > 0 and not llm.each_agent_asks and readable


def with_shared_reads(
    requests: Mapping[str, pb.RunRoundRequest],
) -> dict[str, pb.RunRoundRequest]:
    """Each process's request telling it the round's processes (in address order) and which
    one it is; unchanged for a round on one process, one whose agents cannot draw from a read, or when a process's
    credentials are not known here (each process then reads for itself)."""
    addresses = sorted(requests)
    if len(addresses) < 2 or not any(may_read(r.policy) for r in requests.values()):
        return dict(requests)
    peers = []
    for address in addresses:
        credentials = directory.credentials(address)
        if credentials is None:
            return dict(requests)
        credential = peer_credential(credentials.secret)
        peers.append(pb.Peer(address=address, credential=credential, tls=credentials.tls))
    out = {}
    for index, address in enumerate(addresses):
        own = pb.RunRoundRequest()
        own.CopyFrom(requests[address])
        own.shared_reads.CopyFrom(pb.SharedReads(peers=peers, self=index))
        out[address] = own
    return out
