"""The network layer in unit tests: a hosted population with graph rows, and a NetworkRound
naming the run owners and peers."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from worker_server.rounds.network import csr_gather
from worker_server.rpc import worker_pb2 as pb


@dataclass
class Hosted:
    """What the network layer reads of a hosted population: ids and graph rows."""

    population_id: str
    ids: np.ndarray
    offsets: np.ndarray
    numbers: np.ndarray
    has_graph: bool = True

    def __len__(self) -> int:
        return len(self.ids)

    def neighbour_block(self, rows):
        sub, at = csr_gather(self.offsets, rows)
        return sub, self.numbers[at]


def network_round(starts, owners, size, me=0, peers=2, token="p1") -> pb.NetworkRound:
    return pb.NetworkRound(
        run_starts=starts,
        run_owners=owners,
        size=size,
        peers=[
            pb.Peer(worker_id=i + 1, address=f"127.0.0.1:{5000 + i}", credential="c")
            for i in range(peers)
        ],
        self=me,
        placement=token,
    )
