"""One read of a prompt's answer distribution for the whole cluster (issue 31, item 1).

Exchangeable agents (worker_server.rounds.llm) draw their answers from their prompt's answer
distribution, read once as a logprob tree (worker_server.llm.distribution). Every process hosting
agents with a prompt would read it again, so a round over 2 processes asked the model twice as
often as over 1. Here each prompt has one owner among the round's processes (SharedReads in the
RunRoundRequest): the process at index `digest mod len(peers)`. The owner reads the distribution
once per round, whoever asks first (a cohort of its own, or a peer over the peer plane with
ReadDistribution), and every later asker awaits that same read.

When the owner cannot be reached, or has not been asked to play the round within
REGISTRATION_WAIT_S, the asker reads the distribution itself: that costs requests, never
correctness (every read of one prompt in one round gives the same distribution).

Usage is counted once per read: the first to take a read (a local cohort, or the peer whose
reply carries `counts_usage`) reports its requests and tokens with its round's, so they reach
the manager in a round that is still running.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import grpc
import numpy as np

from worker_server.llm.answering import AnswerSettings
from worker_server.llm.client import LlmClient, Route
from worker_server.llm.distribution import AnswerDistribution, read_distribution, reads_at_once
from worker_server.llm.templates import MAX_PROMPT_CHARS
from worker_server.llm.usage import (
    EndpointUsage,
    UsageTally,
    usage_from_message,
    usage_message,
)
from worker_server.rpc import worker_pb2 as pb
from worker_server.rpc import worker_pb2_grpc
from worker_server.rpc_auth import bearer

log = logging.getLogger(__name__)

# How long an owner waits for its own RunRound of the round a peer asks about (the manager
# starts every process's round at once, so they arrive within moments of each other).
REGISTRATION_WAIT_S = 30.0
# Rounds a peer can ask this process about (a late peer may still ask about the round before).
# A round's own cohorts hold its state themselves, so dropping it here never breaks a round.
KEEP_ROUNDS = 16
# Reads kept per round (oldest finished ones forgotten first): bounded memory whatever the
# number of distinct prompts.
KEEP_READS = 65_536
# A peer's reply may take the read itself: this is on top of the read's own time budget.
REPLY_MARGIN_S = 30.0


def prompt_digest(model: str, system: str, user: str) -> bytes:
    """A short key for a prompt (16 bytes, not the text: bounded memory per remembered answer)."""
    h = hashlib.blake2b(digest_size=16)
    for part in (model, system, user):
        data = part.encode()
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.digest()


@dataclass(frozen=True)
class Read:
    """A read as one asker gets it: the distribution, and, for the one asker that counts it,
    the requests and tokens it cost (empty for the others)."""

    distribution: AnswerDistribution
    counts_usage: bool
    usage: list[EndpointUsage]


@dataclass(frozen=True)
class ReadPeer:
    worker_id: int
    address: str
    credential: str
    tls: bool


@dataclass
class _Round:
    client: LlmClient
    routes: Mapping[str, Route]
    settings: AnswerSettings
    # (model, digest) -> the read (running or done) and whether its usage was taken.
    reads: OrderedDict[tuple[str, bytes], asyncio.Task] = field(default_factory=OrderedDict)
    counted: set[tuple[str, bytes]] = field(default_factory=set)
    # Per model: reads running at once (reads_at_once of the route: the owner's endpoints).
    slots: dict[str, asyncio.Semaphore] = field(default_factory=dict)


class SharedReads:
    """This process's side of the cluster's reads: the rounds it plays (what it needs to read
    for peers) and the reads it has made or is making."""

    def __init__(self, channel: Callable[[str, bool], grpc.aio.Channel] | None = None) -> None:
        self._rounds: OrderedDict[tuple[str, int], _Round] = OrderedDict()
        # Per round: set once it opened here, or once this process's part of it ended (a
        # process with no agent asking never opens it); peers asking before then wait.
        self._opened: OrderedDict[tuple[str, int], asyncio.Event] = OrderedDict()
        self._channel = channel

    def open(
        self,
        key: tuple[str, int],
        client: LlmClient,
        routes: Mapping[str, Route],
        settings: AnswerSettings,
    ) -> _Round:
        """This process plays round `key` ((simulation, round)) with these routes: it reads
        for its peers from now on. Idempotent (every cohort of the round calls it)."""
        state = self._rounds.get(key)
        if state is not None:
            self._rounds.move_to_end(key)
            return state
        state = self._rounds[key] = _Round(client, dict(routes), settings)
        self._mark(key)
        while len(self._rounds) > KEEP_ROUNDS:
            self._rounds.popitem(last=False)
        return state

    def finished(self, key: tuple[str, int]) -> None:
        """This process's part of round `key` ended: a peer asking from now on is answered at
        once (read here if the round opened, NOT_FOUND if no agent here ever asked)."""
        self._mark(key)

    def _mark(self, key: tuple[str, int]) -> None:
        self._opened.setdefault(key, asyncio.Event()).set()
        self._opened.move_to_end(key)
        while len(self._opened) > KEEP_ROUNDS * 4:  # bounded; waiters keep their own event
            self._opened.popitem(last=False)

    async def read(
        self,
        state: _Round,
        key: tuple[str, int],
        model: str,
        system: str,
        user: str,
        peers: tuple[ReadPeer, ...],
        self_index: int,
    ) -> Read:
        """The prompt's distribution in round `key`: read here when this process owns it (or
        plays alone), else asked of its owner, and read here when the owner cannot answer."""
        digest = prompt_digest(model, system, user)
        owner = _owner(digest, len(peers)) if peers else self_index
        if owner != self_index and self._channel is not None:
            peer = peers[owner]
            reply = await self._ask(state, peer, key, model, system, user)
            if reply is not None:
                return reply
        return await self._local(state, model, system, user, digest)

    async def serve(self, request: pb.ReadDistributionRequest) -> pb.ReadDistributionReply:
        """A peer's ReadDistribution. ValueError for a bad request (INVALID_ARGUMENT), LookupError
        for a round this process does not play (NOT_FOUND)."""
        if len(request.system) + len(request.user) > MAX_PROMPT_CHARS:
            raise ValueError(f"system and user: a prompt is at most {MAX_PROMPT_CHARS} characters")
        key = (request.simulation_id, request.round)
        event = self._opened.setdefault(key, asyncio.Event())
        try:
            await asyncio.wait_for(event.wait(), REGISTRATION_WAIT_S)
        except TimeoutError:
            if not event.is_set():
                self._opened.pop(key, None)
            raise LookupError(
                f"round {request.round} of {request.simulation_id!r} is not played here"
            ) from None
        state = self._rounds.get(key)
        if state is None:
            raise LookupError(f"round {request.round} of {request.simulation_id!r} is over here")
        if request.model not in state.routes:
            raise ValueError(f"model: {request.model!r} is not a model of this round")
        digest = prompt_digest(request.model, request.system, request.user)
        read = await self._local(state, request.model, request.system, request.user, digest)
        return _reply(read)

    async def _local(
        self, state: _Round, model: str, system: str, user: str, digest: bytes
    ) -> Read:
        entry = (model, digest)
        task = state.reads.get(entry)
        if task is None:
            task = asyncio.create_task(self._read(state, model, system, user))
            state.reads[entry] = task
            while len(state.reads) > KEEP_READS:  # the oldest are long done: forgotten
                old, _ = state.reads.popitem(last=False)
                state.counted.discard(old)
        else:
            state.reads.move_to_end(entry)
        distribution, usage = await asyncio.shield(task)
        counts = entry not in state.counted
        state.counted.add(entry)
        return Read(distribution, counts, usage if counts else [])

    async def _read(
        self, state: _Round, model: str, system: str, user: str
    ) -> tuple[AnswerDistribution, list[EndpointUsage]]:
        route = state.routes[model]
        slots = state.slots.get(model)
        if slots is None:
            slots = state.slots[model] = asyncio.Semaphore(reads_at_once(route))
        tally = UsageTally()
        async with slots:
            distribution = await read_distribution(
                state.client, route, state.settings, system, user, tally
            )
        return distribution, tally.take()

    async def _ask(
        self,
        state: _Round,
        peer: ReadPeer,
        key: tuple[str, int],
        model: str,
        system: str,
        user: str,
    ) -> Read | None:
        assert self._channel is not None
        request = pb.ReadDistributionRequest(
            simulation_id=key[0], round=key[1], model=model, system=system, user=user
        )
        budget = state.settings.timeout_s + REPLY_MARGIN_S
        stub = worker_pb2_grpc.WorkerServiceStub(self._channel(peer.address, peer.tls))
        try:
            reply = await stub.ReadDistribution(
                request, metadata=bearer(peer.credential), timeout=budget
            )
        except grpc.aio.AioRpcError as exc:
            log.warning(
                "reading a prompt here: its owner at %s did not give it: %s: %s",
                peer.address,
                exc.code().name,
                exc.details(),
            )
            return None
        return _from_reply(reply)


def _owner(digest: bytes, peers: int) -> int:
    return int.from_bytes(digest[:8], "little") % peers


def _reply(read: Read) -> pb.ReadDistributionReply:
    d = read.distribution
    return pb.ReadDistributionReply(
        values=d.values.tolist(),
        probabilities=d.probabilities.tolist(),
        texts=list(d.texts),
        pruned_mass=d.pruned_mass,
        unlisted_bound=d.unlisted_bound,
        requests=d.requests,
        nodes=d.nodes,
        prompt_tokens=d.prompt_tokens,
        completion_tokens=d.completion_tokens,
        elapsed_s=d.elapsed_s,
        error=d.error,
        late=d.late,
        message=d.message,
        counts_usage=read.counts_usage,
        usage=[usage_message(u) for u in read.usage],
    )


def _from_reply(reply: pb.ReadDistributionReply) -> Read | None:
    """The peer's read, or None when its reply does not hold together (read here instead)."""
    values = np.asarray(reply.values, dtype=float)
    probabilities = np.asarray(reply.probabilities, dtype=float)
    if not (len(values) == len(probabilities) == len(reply.texts)) or np.any(np.diff(values) <= 0):
        log.warning("a peer's distribution did not hold together: read here")
        return None
    distribution = AnswerDistribution(
        values=values,
        probabilities=probabilities,
        pruned_mass=reply.pruned_mass,
        unlisted_bound=reply.unlisted_bound,
        requests=reply.requests,
        nodes=reply.nodes,
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
        elapsed_s=reply.elapsed_s,
        error=reply.error,
        late=reply.late,
        texts=tuple(reply.texts),
        message=reply.message,
    )
    usage = [usage_from_message(u) for u in reply.usage] if reply.counts_usage else []
    return Read(distribution, reply.counts_usage, usage)


@dataclass(eq=False)
class RoundReads:
    """One round's way to the cluster's reads: its key, and the processes that own prompts
    (none: this process alone). Holds the round's state once opened."""

    exchange: SharedReads
    key: tuple[str, int]
    peers: tuple[ReadPeer, ...] = ()
    self_index: int = 0
    _state: _Round | None = field(default=None, repr=False)

    def open(self, client: LlmClient, routes: Mapping[str, Route], settings: AnswerSettings):
        self._state = self.exchange.open(self.key, client, routes, settings)

    def finished(self) -> None:
        self.exchange.finished(self.key)

    async def read(self, model: str, system: str, user: str) -> Read:
        if self._state is None:
            raise RuntimeError("RoundReads.read before open")
        return await self.exchange.read(
            self._state, self.key, model, system, user, self.peers, self.self_index
        )
