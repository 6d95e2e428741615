"""The round's processes, told to each of them so that exchangeable LLM agents' answer
distributions are read once for the whole cluster (worker_server.llm.shared_reads): each
process learns the others' addresses and the peer credential each accepts."""

from __future__ import annotations

from collections.abc import Mapping

from backend.workers.channels import directory
from worker_server.rounds.network import peer_credential
from worker_server.rpc import worker_pb2 as pb


def asks_an_llm(policy: pb.Policy) -> bool:
    kind = policy.WhichOneof("kind")
    if kind == "mixed":
        return any(asks_an_llm(part.policy) for part in policy.mixed.parts)
    return kind == "llm"


def with_shared_reads(
    requests: Mapping[str, pb.RunRoundRequest],
) -> dict[str, pb.RunRoundRequest]:
    """Each process's request telling it the round's processes (in address order) and which
    one it is; unchanged for a round on one process, one without an LLM, or when a process's
    credentials are not known here (each process then reads for itself)."""
    addresses = sorted(requests)
    if len(addresses) < 2 or not any(asks_an_llm(r.policy) for r in requests.values()):
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
