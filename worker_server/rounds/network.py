"""A network simulation's values between worker processes: what each agent's neighbours did.

An agent of a network simulation (populace.plugin.Simulation.network) sees its own value after
the last round and its neighbours' values. The neighbours may live on other processes, so after
each round every process sends each peer, in one DeliverValues call, the values of its agents
that neighbour that peer's agents: only those that changed since the last round, or all of them
in round 1 and whenever the placement changed. Values go worker to worker; the manager only holds
the round barrier (a process ends its round's stream after its deliveries were taken, and the
manager starts the next round after every stream ended), so when round r + 1 starts every value
of round r is here.

Per (population, simulation) a process keeps a table of values over "keys": its own agents'
numbers and their neighbours' numbers, sorted. Round r's table is round r - 1's, with this
process's own results of round r and the deltas peers delivered for round r on top; deliveries
are kept (for the last few rounds) and applied again whenever a table is rebuilt, so a replayed
round and a late delivery come out the same. Delivery is an overwrite of a value by agent
number: taking one twice changes nothing, and order does not matter, so what an agent sees
depends on the graph and the seed, never on the placement.

A complete graph (`graph: {kind: complete}`, NetworkRound.complete) stores no edges: there every
process keeps every agent's value (8 bytes an agent a round kept) and sends every peer its
agents' values that changed.

A simulation that pairs agents (Simulation.pairs_agents, worker_server.rounds.pairing) gets each
cohort's partners and their values. On a complete graph anyone computes any agent's partner from
its number. On a graph, an edge is matched when it is the top-priority edge of both its ends:
each process computes its own agents' top partners from their rows, and learns whether a top
partner hosted elsewhere picked back from the round before's deliveries: with its values of
round r, a process sends each peer `offered`/`offered_to`, its agents whose top partner in round
r + 1 is that peer's agent (one pair of numbers per such agent; the priorities are drawn afresh
each round, so this is not a delta). A peer that did not deliver under the current placement is
asked for its agents' top partners with their values (FetchValues with pairing).

Nothing here runs once per agent: layouts, gathers and deltas are numpy over whole arrays.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
from collections import OrderedDict
from dataclasses import dataclass, field

import grpc
import numpy as np

import worker_server.rounds.pairing as pairing
from populace.plugin import Neighbours, Partners, agent_numbers
from worker_server.agents import Population
from worker_server.rounds.errors import InvalidRound, RoundFailed
from worker_server.rounds.neighbour_values import CohortValues, Holders, RoundCounts
from worker_server.rpc import worker_pb2 as pb
from worker_server.rpc import worker_pb2_grpc
from worker_server.rpc_auth import bearer

log = logging.getLogger(__name__)

# The peer plane: the calls a peer credential opens, and nothing else (ReadDistribution:
# worker_server.llm.shared_reads).
PEER_METHODS = (
    "/populace.v1.WorkerService/DeliverValues",
    "/populace.v1.WorkerService/FetchValues",
    "/populace.v1.WorkerService/ReadDistribution",
)
# Rounds of tables and deliveries a process keeps per simulation (a replay reaches back one).
KEEP_ROUNDS = 2
# Simulations whose state a process keeps at once (the least recently played is dropped past
# this; a population's go with it when it is deleted here).
MAX_STATES = 4
# How long a delivery to a peer may take before the round fails.
DELIVERY_TIMEOUT_S = 60.0
MAX_PEERS = 100_000
_PEER_CONTEXT = b"populace.peer.v1"


def peer_credential(secret: str) -> str:
    """What a process accepts from its peers: derived from its RPC secret, so it needs no new
    secret, and good for the peer plane's two calls only (rpc_auth checks which)."""
    return hmac.new(secret.encode(), _PEER_CONTEXT, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Peer:
    worker_id: int
    address: str
    credential: str
    tls: bool


@dataclass(frozen=True)
class Placement:
    """Who hosts which agent numbers (RunRoundRequest.network), validated."""

    starts: np.ndarray  # int64, ascending, starts[0] == 0
    owners: np.ndarray  # int64 index into peers, one per run
    size: int
    peers: tuple[Peer, ...]
    self_index: int
    token: str
    # The population's graph is complete (no edges stored): every process keeps every value.
    complete: bool = False

    def owner_of(self, numbers: np.ndarray) -> np.ndarray:
        return self.owners[np.searchsorted(self.starts, numbers, side="right") - 1]


def placement_from(message: pb.NetworkRound) -> Placement:
    """Validate RunRoundRequest.network (InvalidRound naming the field)."""
    starts = np.asarray(message.run_starts, dtype=np.int64)
    owners = np.asarray(message.run_owners, dtype=np.int64)
    if not 0 < message.size <= 1 << 32:
        raise InvalidRound(f"network.size: in 1..2^32, not {message.size}")
    if not 0 < len(message.peers) <= MAX_PEERS:
        raise InvalidRound(f"network.peers: 1..{MAX_PEERS} peers, not {len(message.peers)}")
    if len(starts) == 0 or len(starts) != len(owners):
        raise InvalidRound("network.run_starts and run_owners: one owner per run, at least one")
    if starts[0] != 0 or np.any(np.diff(starts) <= 0) or starts[-1] >= message.size:
        raise InvalidRound("network.run_starts: rising from 0, each below network.size")
    if owners.min() < 0 or owners.max() >= len(message.peers):
        raise InvalidRound("network.run_owners: indexes into network.peers")
    if not 0 <= message.self < len(message.peers):
        raise InvalidRound(f"network.self: an index into network.peers, not {message.self}")
    peers = []
    for i, peer in enumerate(message.peers):
        if not peer.address or not peer.credential:
            raise InvalidRound(f"network.peers[{i}]: address and credential must be set")
        peers.append(Peer(peer.worker_id, peer.address, peer.credential, peer.tls))
    return Placement(
        starts,
        owners,
        int(message.size),
        tuple(peers),
        int(message.self),
        message.placement,
        bool(message.complete),
    )


def csr_gather(offsets: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(offsets of the rows' sub-block, positions of its entries in the full block)."""
    starts, ends = offsets[rows], offsets[rows + 1]
    lengths = ends - starts
    sub = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=sub[1:])
    at = np.arange(sub[-1], dtype=np.int64) + np.repeat(starts - sub[:-1], lengths)
    return sub, at


def _changed(new: np.ndarray, old: np.ndarray) -> np.ndarray:
    return ~((new == old) | (np.isnan(new) & np.isnan(old)))


@dataclass
class _Layout:
    """A population's hosted agents and their neighbours, as keys into the value tables."""

    agents: int  # len(population) when built
    offsets: np.ndarray  # CSR over the population's rows
    keys: np.ndarray  # sorted agent numbers: own and neighbours
    own_at: np.ndarray  # keys index of each row's agent
    neighbour_at: np.ndarray  # keys index of each CSR entry
    neighbour_numbers: np.ndarray  # int64 numbers of each CSR entry
    # Per placement token: peer index -> rows whose agent neighbours an agent of that peer.
    sends: dict[str, dict[int, np.ndarray]] = field(default_factory=dict)
    # Per placement token: peer index -> keys of that peer's agents (what it delivers here).
    receives: dict[str, dict[int, np.ndarray]] = field(default_factory=dict)
    # A complete graph's layout: keys are every number below `complete` (the population's size
    # when known), and every peer is sent every row.
    complete: int = 0
    # The entries grouped by key, for counting neighbours by value (built at the first count).
    _holders: Holders | None = None

    def holders(self) -> Holders:
        if self._holders is None:  # a race builds it twice, alike
            self._holders = Holders.of(self.offsets, self.neighbour_at, len(self.keys))
        return self._holders

    @classmethod
    def of(cls, population: Population) -> _Layout:
        n = len(population)
        offsets, numbers = population.neighbour_block(np.arange(n, dtype=np.int64))
        own = agent_numbers(population.ids)
        # Numbers are below the population's size: mark the ones present and count, instead of
        # sorting and searching millions of neighbour entries.
        bound = int(max(own.max(initial=-1), numbers.max(initial=-1))) + 1
        present = np.zeros(bound, dtype=bool)
        present[own] = True
        present[numbers] = True
        position = np.cumsum(present, dtype=np.int64) - 1
        return cls(
            agents=n,
            offsets=offsets,
            keys=np.flatnonzero(present),
            own_at=position[own],
            neighbour_at=position[numbers],
            neighbour_numbers=numbers,
        )

    @classmethod
    def of_complete(cls, population: Population, size: int) -> _Layout:
        """A complete graph's: a table over every agent number below `size` (at least the own
        agents': a process seeded before it played knows no more until its round tells it)."""
        n = len(population)
        own = agent_numbers(population.ids)
        size = max(size, int(own.max(initial=-1)) + 1)
        return cls(
            agents=n,
            offsets=np.zeros(n + 1, dtype=np.int64),
            keys=np.arange(size, dtype=np.int64),
            own_at=own.astype(np.int64),
            neighbour_at=np.empty(0, dtype=np.int64),
            neighbour_numbers=np.empty(0, dtype=np.int64),
            complete=size,
        )

    def receives_for(self, placement: Placement) -> dict[int, np.ndarray]:
        """The keys (positions) of the neighbours each peer hosts, by peer index: computed once
        per placement, not every round."""
        cached = self.receives.get(placement.token)
        if cached is not None:
            return cached
        remote = np.ones(len(self.keys), dtype=bool)
        remote[self.own_at] = False
        # The placement is runs of consecutive numbers and the keys are sorted: each run's keys
        # are one slice of them, found by two binary searches (no sort of the keys).
        ends = np.append(placement.starts[1:], placement.size)
        lows = np.searchsorted(self.keys, placement.starts)
        highs = np.searchsorted(self.keys, ends)
        parts: dict[int, list[np.ndarray]] = {}
        for owner, lo, hi in zip(
            placement.owners.tolist(), lows.tolist(), highs.tolist(), strict=True
        ):
            if owner != placement.self_index and hi > lo:
                span = np.arange(lo, hi, dtype=np.int64)
                parts.setdefault(owner, []).append(span[remote[lo:hi]])
        out = {owner: np.concatenate(spans) for owner, spans in parts.items()}
        out = {owner: keys for owner, keys in out.items() if len(keys)}
        self.receives = {placement.token: out}  # one placement at a time
        return out

    def sends_for(self, placement: Placement) -> dict[int, np.ndarray]:
        """Which of this process's rows each peer needs (the graph is undirected: a peer's agent
        neighbours mine exactly when mine neighbours it; on a complete graph every peer needs
        every row)."""
        cached = self.sends.get(placement.token)
        if cached is not None:
            return cached
        if self.complete:
            every = np.arange(self.agents, dtype=np.int64)
            peers = np.unique(placement.owners).tolist()
            out = {p: every for p in peers if p != placement.self_index}
            self.sends = {placement.token: out}
            return out
        owner = placement.owner_of(self.neighbour_numbers)
        row = np.repeat(np.arange(self.agents, dtype=np.int64), np.diff(self.offsets))
        remote = owner != placement.self_index
        pairs = owner[remote] * max(self.agents, 1) + row[remote]
        pairs.sort()
        pairs = pairs[np.concatenate([[True], pairs[1:] != pairs[:-1]])] if len(pairs) else pairs
        peers, rows = np.divmod(pairs, max(self.agents, 1))
        out = {}
        bounds = np.flatnonzero(np.diff(peers)) + 1
        for chunk_peers, chunk_rows in zip(
            np.split(peers, bounds), np.split(rows, bounds), strict=True
        ):
            if len(chunk_peers):
                out[int(chunk_peers[0])] = chunk_rows
        self.sends = {placement.token: out}  # one placement at a time
        return out


@dataclass
class _Delivery:
    sender: int  # worker id
    placement: str  # the token the sender played the round under
    numbers: np.ndarray
    values: np.ndarray
    # A pairing simulation: the sender's agents whose top partner next round is hosted here.
    offered: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    offered_to: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))


@dataclass
class _State:
    """One simulation's values on this process."""

    layout: _Layout
    tables: dict[int, np.ndarray] = field(default_factory=dict)  # round -> values over keys
    streaks: dict[int, np.ndarray] = field(default_factory=dict)  # round -> per row
    # Placement token each peer (by worker id) was last sent a full set under.
    sent_full: dict[int, str] = field(default_factory=dict)
    # Own agents that arrived (moved here) without their values yet: the manager seeds them.
    unseeded: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    # A pairing simulation: round -> own rows' top partners in that round (computed once).
    tops: dict[int, np.ndarray] = field(default_factory=dict)
    # round -> (numbers, their top partners in round + 1) fetched from peers.
    fetched_tops: dict[int, list[tuple[np.ndarray, np.ndarray]]] = field(default_factory=dict)

    def own_tops(self, seed: int, round_number: int) -> np.ndarray:
        """Each own row's top partner in the round (pairing.top_partners over its rows)."""
        tops = self.tops.get(round_number)
        if tops is None:
            layout = self.layout
            own = layout.keys[layout.own_at]
            tops = pairing.top_partners(
                seed, round_number, own, layout.offsets, layout.neighbour_numbers
            )
            self.tops = {r: t for r, t in self.tops.items() if r >= round_number - 1}
            self.tops[round_number] = tops
        return tops

    def forget_before(self, round_number: int) -> None:
        for table in (self.tables, self.streaks, self.fetched_tops):
            for old in [r for r in table if r < round_number - KEEP_ROUNDS]:
                del table[old]

    def rebuilt(self, layout: _Layout) -> _State:
        """This state over a new layout (agents moved here or away): every value kept by agent
        number; the agents new here are unseeded until the manager seeds them."""
        old = self.layout
        moved = _State(layout, sent_full={}, fetched_tops=self.fetched_tops)
        at, known = _positions(old.keys, layout.keys)
        for round_number, table in self.tables.items():
            remapped = np.full(len(layout.keys), np.nan)
            remapped[known] = table[at[known]]
            moved.tables[round_number] = remapped
        own_old = old.keys[old.own_at]
        own_new = layout.keys[layout.own_at]
        rows, stayed = _positions(own_old, own_new)
        for round_number, streak in self.streaks.items():
            remapped = np.zeros(layout.agents, dtype=np.int64)
            remapped[stayed] = streak[rows[stayed]]
            moved.streaks[round_number] = remapped
        moved.unseeded = np.union1d(self.unseeded, own_new[~stayed])
        return moved


def _positions(keys: np.ndarray, numbers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(where each number is in sorted keys, whether it is there at all)."""
    if not len(keys):
        return np.zeros(len(numbers), dtype=np.int64), np.zeros(len(numbers), dtype=bool)
    at = np.minimum(np.searchsorted(keys, numbers), len(keys) - 1)
    return at, keys[at] == numbers


def _fingerprint(population: Population) -> tuple[int, int, int, int]:
    ids = population.ids
    if not len(ids):
        return (0, 0, 0, 0)
    return (len(ids), int(ids[0]), int(ids[-1]), int(ids.sum(dtype=np.int64)))


class NetworkStates:
    """Every network simulation's values on this process, the deliveries peers sent, the
    seeds the manager sent, and the channels to peers."""

    def __init__(self, ca_pem: bytes | None = None) -> None:
        self._states: OrderedDict[tuple[str, str], _State] = OrderedDict()
        self._built_for: dict[tuple[str, str], tuple[int, int, int, int]] = {}
        # (population, simulation) -> round -> deliveries, as they came.
        self._delivered: dict[tuple[str, str], dict[int, list[_Delivery]]] = {}
        self._channels: dict[tuple[str, bool], grpc.aio.Channel] = {}
        self._ca_pem = ca_pem
        self.bytes_sent = 0
        self.fetches = 0

    def forget(self, population_id: str | None = None) -> None:
        """Drop the values of a population's simulations (every population's: None)."""
        for states in (self._states, self._built_for, self._delivered):
            for key in [k for k in states if population_id is None or k[0] == population_id]:
                del states[key]

    # -- the peer plane's server side ------------------------------------------------------

    def take(self, request: pb.DeliverValuesRequest) -> int:
        """Keep a peer's values of a round (InvalidRound on a malformed request)."""
        numbers = _ints(request.numbers, "numbers")
        values = _floats(request.values, "values")
        if len(numbers) != len(values):
            raise InvalidRound(
                f"values: {len(values)} values for {len(numbers)} numbers (one each)"
            )
        if request.round < 1:
            raise InvalidRound(f"round is 1-based, got {request.round}")
        offered = _ints(request.offered, "offered")
        offered_to = _ints(request.offered_to, "offered_to")
        if len(offered) != len(offered_to):
            raise InvalidRound(
                f"offered_to: {len(offered_to)} partners for {len(offered)} agents (one each)"
            )
        key = (request.population_id, request.simulation_id)
        rounds = self._delivered.setdefault(key, {})
        rounds.setdefault(request.round, []).append(
            _Delivery(request.from_worker, request.placement, numbers, values, offered, offered_to)
        )
        for old in [r for r in rounds if r < request.round - KEEP_ROUNDS]:
            del rounds[old]
        # A table already built for that round takes the values now, as a rebuild would.
        state = self._states.get(key)
        if state is not None and request.round in state.tables:
            _overwrite(state.layout.keys, state.tables[request.round], numbers, values)
        while len(self._delivered) > MAX_STATES * 2:
            self._delivered.pop(next(iter(self._delivered)))
        return len(numbers)

    def fetch(self, request: pb.FetchValuesRequest) -> tuple[np.ndarray, np.ndarray | None]:
        """This process's own agents' values after a round, for a peer that lacks them, and with
        `pairing` their top partners in the round after (pairing.NONE: no edge)."""
        numbers = _ints(request.numbers, "numbers")
        state = self._states.get((request.population_id, request.simulation_id))
        table = state.tables.get(request.round) if state is not None else None
        if table is None:
            raise InvalidRound(f"round: no values of round {request.round} of that simulation here")
        layout = state.layout
        own = layout.keys[layout.own_at]
        rows, hosted = _positions(own, numbers)
        if not hosted.all():
            raise InvalidRound(f"numbers: {int((~hosted).sum())} of them are not hosted here")
        if len(state.unseeded) and np.isin(numbers, state.unseeded).any():
            raise InvalidRound("numbers: some moved here and have no values yet")
        tops = None
        if request.pairing and not layout.complete:
            tops = state.own_tops(request.seed, request.round + 1)[rows]
        return table[layout.own_at[rows]], tops

    def seed(self, request: pb.SeedValuesRequest, population: Population | None) -> int:
        """The manager's values of agents that moved here (call it off the event loop)."""
        numbers = _ints(request.numbers, "numbers")
        values = _floats(request.values, "values")
        if len(request.streaks) % 4:
            raise InvalidRound(f"streaks: int32 little-endian, not {len(request.streaks)} bytes")
        streaks = np.frombuffer(request.streaks, dtype="<i4").astype(np.int64)
        if not len(numbers) == len(values) == len(streaks):
            raise InvalidRound("numbers, values and streaks: one each")
        if request.round < 1:
            raise InvalidRound(f"round is 1-based, got {request.round}")
        if population is None:
            raise InvalidRound(f"population_id: {request.population_id!r} is not hosted here")
        state = self._prepared(population, request.simulation_id)
        layout = state.layout
        own = layout.keys[layout.own_at]
        rows, hosted = _positions(own, numbers)
        if not hosted.all():
            raise InvalidRound(f"numbers: {int((~hosted).sum())} of them are not hosted here")
        table = state.tables.get(request.round)
        if table is None:
            table = state.tables[request.round] = np.full(len(layout.keys), np.nan)
        table[layout.own_at[rows]] = values
        streak = state.streaks.get(request.round)
        if streak is None:
            streak = state.streaks[request.round] = np.zeros(layout.agents, dtype=np.int64)
        streak[rows] = streaks
        state.unseeded = np.setdiff1d(state.unseeded, numbers, assume_unique=True)
        return len(numbers)

    # -- a round ---------------------------------------------------------------------------

    def check(
        self, population: Population, simulation_id: str, round_number: int, complete: bool = False
    ) -> None:
        """InvalidRound when this process cannot play the round (cheap: no layout is built)."""
        if not population.has_graph and not complete:
            raise InvalidRound(f"network: population {population.population_id} has no graph here")
        key = (population.population_id, simulation_id)
        if round_number > 1 and key not in self._states:
            raise InvalidRound(
                f"network: this process has no values of round {round_number - 1} of its "
                f"agents of population {population.population_id}: the manager seeds agents "
                "that moved here before their next round"
            )

    def _prepared(
        self, population: Population, simulation_id: str, complete: int | None = None
    ) -> _State:
        """The simulation's state over the agents hosted now (built or rebuilt off the loop).
        complete: the population's size when its graph is complete, 0 when it has edges, None
        when not told (a seed: the state's layout stays of its kind; a population without a
        graph here can only be a complete graph's)."""
        key = (population.population_id, simulation_id)
        state = self._states.get(key)
        if complete is None:
            complete = 0 if population.has_graph else (state.layout.complete if state else 0)
            complete = complete or (0 if population.has_graph else 1)
        fingerprint = (*_fingerprint(population), complete)
        if state is None or self._built_for.get(key) != fingerprint:
            if complete:
                layout = _Layout.of_complete(population, complete)
            else:
                layout = _Layout.of(population)
            state = _State(layout) if state is None else state.rebuilt(layout)
            self._states[key] = state
            self._built_for[key] = fingerprint
            while len(self._states) > MAX_STATES:
                old, _ = self._states.popitem(last=False)
                self._built_for.pop(old, None)
        self._states.move_to_end(key)
        return state

    def prepare(
        self,
        population: Population,
        simulation_id: str,
        round_number: int,
        complete: int = 0,
    ) -> _State:
        """The state a round starts from: the last round's table with every delivery of it
        applied (InvalidRound when own agents lack their values). Off the event loop.
        complete: the population's size when its graph is complete."""
        self.check(population, simulation_id, round_number, bool(complete))
        state = self._prepared(population, simulation_id, complete)
        if round_number == 1:
            state.unseeded = state.unseeded[:0]  # nothing comes before round 1
            return state
        if len(state.unseeded):
            raise InvalidRound(
                f"network: {len(state.unseeded)} agents moved here have no values of round "
                f"{round_number - 1} (the manager seeds them first)"
            )
        before = round_number - 1
        if before not in state.tables:
            raise InvalidRound(f"network: this process has no values of round {before}")
        key = (population.population_id, simulation_id)
        for delivery in self._delivered.get(key, {}).get(before, ()):
            _overwrite(state.layout.keys, state.tables[before], delivery.numbers, delivery.values)
        return state

    async def fill(
        self,
        state: _State,
        key: tuple[str, str],
        round_number: int,
        placement: Placement,
        pairs: tuple[int] | None = None,
    ) -> None:
        """Fetch the last round's values of neighbours whose host did not deliver them under
        this placement (agents moved, or this process did): one call per such peer. pairs:
        (seed,) of a pairing simulation on a graph, whose top partners come along."""
        if round_number == 1:
            return
        before = round_number - 1
        layout = state.layout
        delivered = {
            d.sender
            for d in self._delivered.get(key, {}).get(before, ())
            if d.placement == placement.token
        }
        calls = []
        for peer_index, wanted in layout.receives_for(placement).items():
            peer = placement.peers[peer_index]
            if peer.worker_id not in delivered:
                calls.append((peer, wanted))

        async def one(peer: Peer, wanted: np.ndarray) -> None:
            request = pb.FetchValuesRequest(
                simulation_id=key[1],
                population_id=key[0],
                round=before,
                numbers=layout.keys[wanted].astype("<u4").tobytes(),
                pairing=pairs is not None,
                seed=pairs[0] if pairs is not None else 0,
            )
            stub = worker_pb2_grpc.WorkerServiceStub(self._channel(peer))
            try:
                reply = await stub.FetchValues(
                    request, metadata=bearer(peer.credential), timeout=DELIVERY_TIMEOUT_S
                )
            except grpc.aio.AioRpcError as exc:
                raise RoundFailed(
                    f"network: could not fetch round {before}'s values from worker "
                    f"{peer.worker_id} at {peer.address}: {exc.code().name}: {exc.details()}"
                ) from exc
            values = _floats(reply.values, "values")
            if len(values) != len(wanted):
                raise RoundFailed(f"network: worker {peer.worker_id} sent {len(values)} values")
            if pairs is not None:
                tops = np.frombuffer(reply.partners, dtype="<u4").astype(np.int64)
                if len(tops) != len(wanted):
                    raise RoundFailed(f"network: worker {peer.worker_id} sent {len(tops)} partners")
                tops[tops == 0xFFFFFFFF] = pairing.NONE
                state.fetched_tops.setdefault(before, []).append((layout.keys[wanted], tops))
            state.tables[before][wanted] = values
            self.fetches += 1

        await asyncio.gather(*(one(*call) for call in calls))

    def view(
        self,
        state: _State,
        key: tuple[str, str],
        round_number: int,
        pairs: tuple[int] | None = None,
    ) -> RoundView:
        """The round as its cohorts see it; pairs: (seed,) of a simulation that pairs agents."""
        before = state.tables.get(round_number - 1)
        if before is None:  # round 1: nothing before it
            before = state.tables[0] = np.full(len(state.layout.keys), np.nan)
        streak = state.streaks.get(round_number - 1)
        if streak is None:
            streak = np.zeros(state.layout.agents, dtype=np.int64)
        return RoundView(self, state, key, round_number, before, streak, pairs)

    def batches(
        self,
        state: _State,
        key: tuple[str, str],
        round_number: int,
        placement: Placement,
        before: np.ndarray,
        after: np.ndarray,
        pairs: tuple[int] | None = None,
    ) -> list[tuple[Peer, pb.DeliverValuesRequest, bool]]:
        """One DeliverValues per peer: its changed values of the round (all of them the first
        time under this placement), and for a pairing simulation on a graph the agents whose
        top partner next round it hosts."""
        layout = state.layout
        own = layout.keys[layout.own_at]
        changed = _changed(after[layout.own_at], before[layout.own_at])
        calls = []
        me = placement.peers[placement.self_index].worker_id
        offers: dict[int, np.ndarray] = {}
        if pairs is not None and not layout.complete:
            tops = state.own_tops(pairs[0], round_number + 1)
            rows = np.flatnonzero(tops >= 0)
            host = placement.owner_of(tops[rows])
            rows, host = rows[host != placement.self_index], host[host != placement.self_index]
            offers = {p: rows[host == p] for p in np.unique(host).tolist()}
            offered_tops = tops
        for peer_index, rows in layout.sends_for(placement).items():
            peer = placement.peers[peer_index]
            full = round_number == 1 or state.sent_full.get(peer.worker_id) != placement.token
            chosen = rows if full else rows[changed[rows]]
            request = pb.DeliverValuesRequest(
                simulation_id=key[1],
                population_id=key[0],
                round=round_number,
                from_worker=me,
                numbers=own[chosen].astype("<u4").tobytes(),
                values=after[layout.own_at[chosen]].astype("<f8").tobytes(),
                placement=placement.token,
            )
            offered = offers.get(peer_index)
            if offered is not None:
                request.offered = own[offered].astype("<u4").tobytes()
                request.offered_to = offered_tops[offered].astype("<u4").tobytes()
            calls.append((peer, request, full))
        return calls

    async def deliver(
        self,
        state: _State,
        placement: Placement,
        calls: list[tuple[Peer, pb.DeliverValuesRequest, bool]],
    ) -> int:
        """Send the batches; returns the bytes sent (RoundFailed when a peer refuses)."""

        async def one(peer: Peer, request: pb.DeliverValuesRequest, full: bool) -> None:
            stub = worker_pb2_grpc.WorkerServiceStub(self._channel(peer))
            try:
                await stub.DeliverValues(
                    request, metadata=bearer(peer.credential), timeout=DELIVERY_TIMEOUT_S
                )
            except grpc.aio.AioRpcError as exc:
                raise RoundFailed(
                    f"network: could not deliver round {request.round}'s values to worker "
                    f"{peer.worker_id} at {peer.address}: {exc.code().name}: {exc.details()}"
                ) from exc
            if full:
                state.sent_full[peer.worker_id] = placement.token

        await asyncio.gather(*(one(*call) for call in calls))
        sent = sum(
            len(request.numbers)
            + len(request.values)
            + len(request.offered)
            + len(request.offered_to)
            for _, request, _ in calls
        )
        self.bytes_sent += sent
        return sent

    def _channel(self, peer: Peer) -> grpc.aio.Channel:
        return self.channel(peer.address, peer.tls)

    def channel(self, address: str, tls: bool) -> grpc.aio.Channel:
        """The process's one channel to a peer (shared with worker_server.llm.shared_reads)."""
        channel = self._channels.get((address, tls))
        if channel is None:
            options = [
                ("grpc.max_send_message_length", 256 * 1024 * 1024),
                ("grpc.max_receive_message_length", 256 * 1024 * 1024),
            ]
            if tls:
                credentials = grpc.ssl_channel_credentials(root_certificates=self._ca_pem)
                channel = grpc.aio.secure_channel(address, credentials, options=options)
            else:
                channel = grpc.aio.insecure_channel(address, options=options)
            self._channels[(address, tls)] = channel
        return channel

    async def close(self) -> None:
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            await channel.close()


@dataclass
class RoundView:
    """One round of one network simulation on this process: what cohorts see, and the round's
    end (record)."""

    states: NetworkStates
    state: _State
    key: tuple[str, str]
    round: int
    before: np.ndarray  # values over keys after the last round
    streak: np.ndarray  # per row, after the last round
    # (seed,) of a simulation that pairs agents; None: no pairs.
    pairs: tuple[int] | None = None
    _partners: np.ndarray | None = None  # per row, computed at the first cohort's call
    _counts: RoundCounts | None = None  # neighbours by value, shared by the cohorts

    def observe(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, Neighbours | None]:
        """(previous, streak, neighbours) of the agents at these population rows (neighbours
        None on a complete graph: no edges are stored)."""
        layout = self.state.layout
        if layout.complete:
            return self.before[layout.own_at[rows]], self.streak[rows], None
        if len(rows) and rows[-1] - rows[0] + 1 == len(rows):
            # A cohort of consecutive rows (the usual case): its block is a slice, no gather.
            lo, hi = layout.offsets[rows[0]], layout.offsets[rows[-1] + 1]
            at = slice(int(lo), int(hi))
            offsets = layout.offsets[rows[0] : rows[-1] + 2] - lo
        else:
            offsets, at = csr_gather(layout.offsets, rows)
        if self._counts is None:
            self._counts = RoundCounts(self.before, layout.holders, layout.agents)
        values = CohortValues(self.before, layout.neighbour_at[at], rows, self._counts)
        neighbours = Neighbours(offsets, layout.neighbour_numbers[at], source=values)
        return self.before[layout.own_at[rows]], self.streak[rows], neighbours

    def partners(self, rows: np.ndarray) -> Partners | None:
        """Whom the agents at these rows meet this round, with their values (None: the
        simulation does not pair agents)."""
        if self.pairs is None:
            return None
        partner = self._partners
        if partner is None:  # the same for every cohort; a race computes it twice, alike
            partner = self._partners = self._matching()
        mine = partner[rows]
        at, known = _positions(self.state.layout.keys, mine)
        values = np.where(known & (mine >= 0), self.before[at], np.nan)
        return Partners(numbers=mine, values=values)

    def _matching(self) -> np.ndarray:
        """Every own row's partner this round (pairing.NONE: none; nobody in round 1)."""
        layout, state = self.state.layout, self.state
        own = layout.keys[layout.own_at]
        if self.round == 1:
            return np.full(layout.agents, pairing.NONE, dtype=np.int64)
        (seed,) = self.pairs
        if layout.complete:
            return pairing.complete_pairs(seed, self.round, own, layout.complete)
        tops = state.own_tops(seed, self.round)
        # Tops of the agents hosted elsewhere that picked one of ours: offered with their
        # values of the round before, or fetched with them.
        told = [
            (d.offered, d.offered_to)
            for d in self.states._delivered.get(self.key, {}).get(self.round - 1, ())
        ]
        told += state.fetched_tops.get(self.round - 1, [])
        remote = np.full(len(layout.keys), pairing.NONE, dtype=np.int64)
        for numbers, partners in told:
            at, known = _positions(layout.keys, numbers)
            remote[at[known]] = partners[known]
        own_row = np.full(len(layout.keys), -1, dtype=np.int64)
        own_row[layout.own_at] = np.arange(layout.agents)
        top_at, known = _positions(layout.keys, tops)
        known &= tops >= 0
        row_of_top = np.where(known, own_row[top_at], -1)
        tops_of_tops = np.where(
            row_of_top >= 0,
            tops[np.maximum(row_of_top, 0)],
            np.where(known, remote[top_at], pairing.NONE),
        )
        return pairing.matched(own, tops, tops_of_tops)

    def record(
        self, rows: np.ndarray, values: np.ndarray, placement: Placement
    ) -> list[tuple[Peer, pb.DeliverValuesRequest, bool]]:
        """Record the acting rows' values of this round (NaN: no valid action); returns what
        to send the peers (numpy over whole arrays: call it off the event loop)."""
        layout, state = self.state.layout, self.state
        # A replay of some agents keeps what the others did in this round's first play.
        played = state.tables.get(self.round)
        after = (played if played is not None else self.before).copy()
        after[layout.own_at[rows]] = values
        for delivery in self.states._delivered.get(self.key, {}).get(self.round, ()):
            _overwrite(layout.keys, after, delivery.numbers, delivery.values)
        streak = state.streaks.get(self.round)
        streak = self.streak.copy() if streak is None else streak
        held = ~_changed(values, self.before[layout.own_at[rows]])
        streak[rows] = np.where(held & (self.round > 1), self.streak[rows] + 1, 1)
        state.tables[self.round] = after
        state.streaks[self.round] = streak
        state.forget_before(self.round)
        return self.states.batches(
            state, self.key, self.round, placement, self.before, after, self.pairs
        )


def _overwrite(keys: np.ndarray, table: np.ndarray, numbers: np.ndarray, values) -> None:
    if not len(numbers):
        return
    at = np.minimum(np.searchsorted(keys, numbers), len(keys) - 1)
    known = keys[at] == numbers
    table[at[known]] = values[known]


def _ints(data: bytes, name: str) -> np.ndarray:
    if len(data) % 4:
        raise InvalidRound(f"{name}: uint32 little-endian, not {len(data)} bytes")
    return np.frombuffer(data, dtype="<u4").astype(np.int64)


def _floats(data: bytes, name: str) -> np.ndarray:
    if len(data) % 8:
        raise InvalidRound(f"{name}: float64 little-endian, not {len(data)} bytes")
    return np.frombuffer(data, dtype="<f8").astype(np.float64)


@dataclass
class NetworkRound:
    """A round's network side, bound when the request arrives and to the population at its
    first use: the view cohorts read, and the round's end."""

    states: NetworkStates
    placement: Placement
    simulation_id: str
    round: int
    # The run's seed, and whether its plugin pairs agents (set once the plugin is known).
    seed: int = 0
    pairing: bool = False
    _view: RoundView | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def complete_size(self) -> int:
        return self.placement.size if self.placement.complete else 0

    def check(self, population: Population) -> None:
        self.states.check(population, self.simulation_id, self.round, self.placement.complete)

    async def view(self, population: Population) -> RoundView:
        async with self._lock:  # the first cohort builds it, off the event loop
            if self._view is None:
                key = (population.population_id, self.simulation_id)
                state = await asyncio.to_thread(
                    self.states.prepare,
                    population,
                    self.simulation_id,
                    self.round,
                    self.complete_size,
                )
                pairs = (self.seed,) if self.pairing else None
                graph_pairs = pairs if not self.placement.complete else None
                await self.states.fill(state, key, self.round, self.placement, graph_pairs)
                self._view = self.states.view(state, key, self.round, pairs)
        return self._view

    async def complete(self, population: Population, rows: np.ndarray, values: np.ndarray) -> int:
        view = await self.view(population)
        calls = await asyncio.to_thread(view.record, rows, values, self.placement)
        return await self.states.deliver(view.state, self.placement, calls)
