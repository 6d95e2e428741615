"""Fan one round out to every worker process holding the population, and merge the results.

Each worker's RunRound stream is consumed concurrently; decision batches go to a callback (for
persistence) as they arrive, and the partial aggregates are merged into exact statistics. If one
worker fails, the others' streams are cancelled, which cancels their rounds too; or, with
`tolerate_failures`, the others finish and the failures are reported by worker (the caller then
asks the failed workers' agents again, elsewhere).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from backend.rounds.merge import RoundStats, merge
from backend.workers.plane_errors import WorkerPlaneError, WorkerPluginFailed
from worker_server.rounds.decision_batch import decision_arrays
from worker_server.rpc import worker_pb2 as pb

log = logging.getLogger(__name__)
DEFAULT_BINS = 101
DecisionCallback = Callable[[str, pb.DecisionBatch], Awaitable[None] | None]


class RoundWorker(Protocol):
    """One worker process as the rounds see it: the workers port. Over the network it is a
    backend.workers.grpc_client.WorkerClient; a test may plug in the worker's own round code
    in the same process (no sockets), and the rounds cannot tell."""

    address: str

    def run_round(
        self, request: pb.RunRoundRequest, timeout: float | None = None
    ) -> AsyncIterator[pb.RoundMessage]:
        """DecisionBatch messages, then one PartialAggregate; a WorkerPlaneError on failure."""
        ...

    async def cancel_round(self, round_id: str, timeout: float = 10.0) -> bool: ...

    async def probe_llm(
        self, endpoints: Iterable[pb.LlmEndpoint], timeout_s: float = 5.0, check_only: bool = False
    ) -> pb.ProbeLlmReply: ...

    async def seed_values(
        self, request: pb.SeedValuesRequest, timeout: float = 120.0
    ) -> pb.SeedValuesReply:
        """A network simulation's values of agents that moved to this process."""
        ...

    async def close(self) -> None: ...


# Opens the workers port to the worker process at an address.
ConnectWorker = Callable[[str], RoundWorker]


class RoundFailed(RuntimeError):
    """A worker failed the round; names the worker and its reason."""


class PluginRaised(RuntimeError):
    """The simulation plugin's code failed the round on a worker (FAILED_PRECONDITION): not a
    fault of that worker, so the round stops at once and the run pauses with the error."""


@dataclass
class RoundResult:
    stats: RoundStats
    partials: dict[str, pb.PartialAggregate]
    decisions_received: int
    elapsed_s: float
    # With tolerate_failures: {address: why} for the workers that did not finish.
    failures: dict[str, str] = field(default_factory=dict)


@dataclass
class DecisionCollector:
    """Keeps every streamed decision in growing numpy chunks (ids, values, invalid, late)."""

    ids: list[np.ndarray] = field(default_factory=list)
    values: list[np.ndarray] = field(default_factory=list)
    invalid: list[np.ndarray] = field(default_factory=list)
    late: list[np.ndarray] = field(default_factory=list)

    def __call__(self, _address: str, batch: pb.DecisionBatch) -> None:
        arrays = decision_arrays(batch)
        self.ids.append(arrays.ids)
        self.values.append(arrays.values)
        if len(arrays.invalid_ids):
            self.invalid.append(arrays.invalid_ids)
        if len(arrays.late_ids):
            self.late.append(arrays.late_ids)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if not self.ids:
            return np.empty(0, np.int64), np.empty(0, np.float64)
        return np.concatenate(self.ids), np.concatenate(self.values)


async def run_round(
    clients: Sequence[RoundWorker],
    request: pb.RunRoundRequest | Mapping[str, pb.RunRoundRequest],
    on_decisions: DecisionCallback | None = None,
    timeout: float | None = None,
    *,
    tolerate_failures: bool = False,
    gone: Callable[[str], Awaitable[None]] | None = None,
) -> RoundResult:
    """gone(address), with tolerate_failures: returns when that worker is known to be gone (the
    registry marked it offline), so a worker that froze or was cut off mid-round fails the
    round's stream instead of holding it open forever. `request` may differ by worker (a
    mapping by address): the same round, with each worker's share of the LLM concurrency."""
    started = time.perf_counter()
    if isinstance(request, Mapping):
        requests = request
        if not requests or not clients:
            # No live worker hosts any agent: nobody answers; the caller sees every agent
            # missing and decides (wait for hosts, pause), instead of failing on an empty map.
            return RoundResult(merge((), pb.GameRule(), DEFAULT_BINS), {}, 0, 0.0)
        request = next(iter(requests.values()))  # what they share: round, rule, bins
    else:
        requests = {client.address: request for client in clients}
    received = _Received()
    failures: dict[str, str] = {}

    def one(client: RoundWorker) -> Awaitable[pb.PartialAggregate]:
        return _stream(client, requests[client.address], timeout, on_decisions, received)

    async def tolerant(client: RoundWorker) -> pb.PartialAggregate | None:
        try:
            if gone is None:
                return await one(client)
            return await _unless_gone(one(client), gone, client.address, request.round)
        except RoundFailed as exc:
            failures[client.address] = str(exc)
            return None

    try:
        async with asyncio.TaskGroup() as group:
            run = tolerant if tolerate_failures else one
            tasks = {client.address: group.create_task(run(client)) for client in clients}
    except* PluginRaised as raised:
        raise raised.exceptions[0] from None
    except* RoundFailed as failed:
        raise failed.exceptions[0] from None
    partials = {
        address: task.result() for address, task in tasks.items() if task.result() is not None
    }
    bins = request.histogram_bins or DEFAULT_BINS
    stats = merge(partials.values(), request.rule, bins)
    return RoundResult(stats, partials, received.n, time.perf_counter() - started, failures)


@dataclass
class _Received:
    """Decisions received so far over every stream of a round (failed ones included)."""

    n: int = 0


async def _stream(
    client: RoundWorker,
    request: pb.RunRoundRequest,
    timeout: float | None,
    on_decisions: DecisionCallback | None,
    received: _Received,
) -> pb.PartialAggregate:
    """One worker's stream of the round: its decisions to on_decisions as they come, then
    its partial aggregate (RoundFailed, PluginRaised when it fails)."""
    aggregate = None
    try:
        async for message in client.run_round(request, timeout=timeout):
            if message.WhichOneof("body") == "decisions":
                try:
                    received.n += len(decision_arrays(message.decisions).ids)
                except ValueError as exc:
                    raise RoundFailed(
                        f"worker {client.address} sent a malformed batch in round "
                        f"{request.round}: {exc}"
                    ) from None
                if on_decisions is not None:
                    result = on_decisions(client.address, message.decisions)
                    if inspect.isawaitable(result):
                        await result
            else:
                aggregate = message.aggregate
    except WorkerPluginFailed as exc:
        raise PluginRaised(f"on worker {client.address}: {exc.message}") from exc
    except WorkerPlaneError as exc:
        raise RoundFailed(
            f"worker {client.address} failed round {request.round}: {exc.status}: {exc.message}"
        ) from exc
    if aggregate is None:
        raise RoundFailed(
            f"worker {client.address} ended round {request.round} without an aggregate"
        )
    return aggregate


async def _unless_gone(
    stream: Awaitable[pb.PartialAggregate],
    gone: Callable[[str], Awaitable[None]],
    address: str,
    round_number: int,
) -> pb.PartialAggregate:
    consume = asyncio.ensure_future(stream)
    watch = asyncio.ensure_future(gone(address))
    went = False
    try:
        while True:
            done, _ = await asyncio.wait({consume, watch}, return_when=asyncio.FIRST_COMPLETED)
            if consume in done:
                break
            if watch.exception() is None:
                went = True
                break
            # The watch could not tell (e.g. the store was unreachable): the worker is not known
            # to be gone, so its stream goes on, under a new watch.
            log.warning("the liveness watch of worker %s failed: %r", address, watch.exception())
            watch = asyncio.ensure_future(gone(address))
    finally:
        # Whichever way this ends (the stream done, the worker gone, or this task cancelled
        # with the round): neither task may outlive it, and both are awaited, so a watcher that
        # ends with an error on its way out is logged here, never left unretrieved.
        await _settle(watch, f"the liveness watch of worker {address}")
        if not consume.done():
            await _settle(consume, None)
    if not went:
        return consume.result()
    raise RoundFailed(f"worker {address} went offline during round {round_number}")


async def _settle(task: asyncio.Future, what: str | None) -> None:
    """Cancel the task and wait until it has stopped. Its own error is logged (`what` names it)
    or dropped (None: the caller reports the round's failure); a cancellation of the caller
    while it waits is passed on once the task has stopped."""
    task.cancel()
    cancelled: BaseException | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as exc:
            cancelled = exc
    error = None if task.cancelled() else task.exception()  # retrieved either way
    if error is not None and what is not None:
        log.warning("%s failed while stopping: %r", what, error)
    if cancelled is not None:
        raise cancelled


async def cancel_round(clients: Sequence[RoundWorker], round_id: str) -> int:
    """Ask every worker to cancel; returns how many had the round running."""
    replies = await asyncio.gather(
        *(client.cancel_round(round_id) for client in clients), return_exceptions=True
    )
    return sum(1 for reply in replies if reply is True)
