"""What the manager tells the processes of a network simulation: who hosts which agents.

A network simulation's values travel worker to worker (worker_server.rounds.network); the
manager only says, with each round's request, which process hosts which agent numbers (as runs:
a handful of rows however many agents) and how to reach each peer: its address, whether it
speaks TLS, and the peer credential it accepts (derived from its RPC secret; it opens the peer
plane's two calls and nothing else). The placement is read from the store when it may have
changed (the keeper's placement version), not every round.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sqlalchemy.ext.asyncio import AsyncSession

from backend.populations.store import id_range, placement_runs
from backend.workers import registry
from backend.workers.channels import directory
from populace.plugin import LOST, RoundActions, agent_numbers
from worker_server.graphs.stats import component_labels
from worker_server.graphs.storage import open_graph
from worker_server.rounds.network import peer_credential
from worker_server.rpc import worker_pb2 as pb


def is_complete(population) -> bool:
    """Whether the population was deployed with a complete graph (no edges are stored)."""
    return ((population.config or {}).get("graph") or {}).get("kind") == "complete"


class NetworkUnplaced(RuntimeError):
    """Some agents have no live host: the round cannot say where their values are."""


@dataclass(frozen=True)
class NetworkPlacement:
    """The runs of agent numbers and the live process hosting each."""

    starts: list[int]
    worker_ids: list[int]
    size: int
    addresses: dict[int, str]  # worker id -> address
    # The population's graph is complete (no edges stored): workers keep every agent's value.
    complete: bool = False

    @property
    def token(self) -> str:
        digest = hashlib.blake2b(digest_size=12)
        digest.update(np.asarray(self.starts, dtype=np.int64).tobytes())
        digest.update(np.asarray(self.worker_ids, dtype=np.int64).tobytes())
        return digest.hexdigest()

    def message_for(self, address: str) -> pb.NetworkRound:
        """The request's network part for the process at `address`."""
        order = sorted(set(self.worker_ids))
        index = {worker: i for i, worker in enumerate(order)}
        peers = []
        for worker in order:
            peer_address = self.addresses[worker]
            credentials = directory.credentials(peer_address)
            if credentials is None:
                raise NetworkUnplaced(f"worker {worker} at {peer_address} has not registered")
            peers.append(
                pb.Peer(
                    worker_id=worker,
                    address=peer_address,
                    credential=peer_credential(credentials.secret),
                    tls=credentials.tls,
                )
            )
        own = [i for i, worker in enumerate(order) if self.addresses[worker] == address]
        if not own:
            raise NetworkUnplaced(f"the process at {address} hosts none of the population")
        return pb.NetworkRound(
            run_starts=self.starts,
            run_owners=[index[w] for w in self.worker_ids],
            size=self.size,
            peers=peers,
            self=own[0],
            placement=self.token,
            complete=self.complete,
        )


async def network_placement(
    session: AsyncSession, population_id: int, size: int, complete: bool = False
) -> NetworkPlacement:
    """The population's placement as runs; NetworkUnplaced when an agent has no live host.
    complete: its graph is complete (told to the workers with each round)."""
    lo, _ = id_range(population_id)
    rows = await placement_runs(session, population_id)
    live = dict(await registry.live_workers(session))
    starts, workers = [], []
    for first, worker in rows:
        if worker is None or worker not in live:
            raise NetworkUnplaced(
                f"agents from number {first - lo} on are not hosted by a live worker"
                + (f" (worker {worker} is offline)" if worker is not None else "")
            )
        starts.append(int(first - lo))
        workers.append(int(worker))
    if not starts or starts[0] != 0:
        raise NetworkUnplaced("the population's agents are not all in the store")
    return NetworkPlacement(starts, workers, size, {w: live[w] for w in set(workers)}, complete)


def group_labels(path: Path) -> np.ndarray:
    """Each agent's group for a network simulation: its connected component, numbered 0, 1, ...
    by the component's lowest agent (read from the population's graph file)."""
    label = component_labels(open_graph(path).graph)
    first = np.zeros(len(label), dtype=np.int64)
    first[label] = 1  # component_labels names each component by its lowest agent
    return np.cumsum(first)[label] - 1


def _changed(new: np.ndarray, old: np.ndarray) -> np.ndarray:
    return ~((new == old) | (np.isnan(new) & np.isnan(old)))


@dataclass
class NetworkMemory:
    """Every agent's value and streak after the last played round, as the manager saw them
    (16 bytes an agent): what agents that move to another process are seeded with, so a run
    that lost a worker plays on exactly as an undisturbed one."""

    values: np.ndarray  # float64 per agent number; NaN: no valid action
    streaks: np.ndarray  # int64 per agent number
    # uint8 per agent number: the decision's status (what a run that stores changes compares).
    status: np.ndarray
    round: int = 0

    @classmethod
    def empty(cls, size: int) -> NetworkMemory:
        return cls(
            np.full(size, np.nan), np.zeros(size, dtype=np.int64), np.full(size, LOST, np.uint8)
        )

    def played(self, round_number: int, actions: RoundActions) -> None:
        """Take a round's actions (the same rule as the workers' streaks)."""
        values = np.full(len(self.values), np.nan)
        numbers = agent_numbers(actions.agent_ids)
        values[numbers] = np.where(actions.valid, actions.values, np.nan)
        held = ~_changed(values, self.values)
        self.streaks = np.where(held & (round_number > 1), self.streaks + 1, 1)
        status = np.full(len(self.status), LOST, np.uint8)
        status[numbers] = actions.status
        self.values, self.status, self.round = values, status, round_number

    def seed_for(
        self, simulation_id: int, population_id: int, numbers: np.ndarray
    ) -> pb.SeedValuesRequest:
        return pb.SeedValuesRequest(
            simulation_id=str(simulation_id),
            population_id=str(population_id),
            round=self.round,
            numbers=numbers.astype("<u4").tobytes(),
            values=self.values[numbers].astype("<f8").tobytes(),
            streaks=self.streaks[numbers].astype("<i4").tobytes(),
        )


def hosted_numbers(placement: NetworkPlacement, worker_id: int) -> np.ndarray:
    """The agent numbers a worker hosts under a placement."""
    ends = [*placement.starts[1:], placement.size]
    parts = [
        np.arange(start, end, dtype=np.int64)
        for start, end, worker in zip(placement.starts, ends, placement.worker_ids, strict=True)
        if worker == worker_id
    ]
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


def moved_workers(before: NetworkPlacement | None, after: NetworkPlacement) -> list[int]:
    """The workers whose agents differ between two placements (every worker when there is no
    placement before: a resumed run does not know what the workers hold)."""
    if before is None:
        return sorted(set(after.worker_ids))

    def runs(placement: NetworkPlacement) -> dict[int, list[tuple[int, int]]]:
        ends = [*placement.starts[1:], placement.size]
        out: dict[int, list[tuple[int, int]]] = {}
        for start, end, worker in zip(placement.starts, ends, placement.worker_ids, strict=True):
            out.setdefault(worker, []).append((start, end))
        return out

    old, new = runs(before), runs(after)
    return sorted(w for w in new if old.get(w) != new[w])
