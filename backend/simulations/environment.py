"""The global environment: the simulation's state on the manager, itself run like an agent.

It holds the run's state (the round, every kept round's metrics, the feedback agents have
heard), runs each round through the workers' sub-environments (one RunRound per worker process
hosting the population), has the simulation's plugin resolve what comes back into the round's
metrics, applies the stop rules (the generic stop-when-converged over a declared metric, then
the plugin's own), and calls its listeners: persistence, events, guards. What the plugin makes
of a round's metrics is the next round's feedback, and every earlier round's feedback is the
agents' history. A plugin whose code raises pauses the run with its error (resumable once the
plugin is fixed), never the manager.

Committing a round (its listeners' `round_completed`: the decisions and statistics written in
one transaction, then `round.completed`) does not hold up the next round: the next round's
fan-out starts as soon as the outcome is known, while the round commits in the background.
Commits run one at a time in round order, and a round's commit waits for the one before it, so
at most one round is being written while the next one plays (bounded memory: two rounds'
decisions). A round is reported completed only once it is stored; a commit that fails stops
the round in flight (nothing of it is kept) and fails the run with the commit's error; a run
that stops (cancel, pause, failure) still lands the round it was committing, which is whole.

A round completes only when every agent of the population is accounted for:

- a worker failing mid-round does not end the run: its decisions are dropped, the others finish,
  and the round waits (up to `FaultPolicy.recovery_s`) for the lost agents to be hosted again
  (restored on the restarted worker, or re-placed), then asks only them again. Randomness is
  keyed by (seed, round, agent), so they answer what they would have answered;
- agents still not hosted when the wait ends are `lost`: counted as such with allow_partial
  (which does not wait: one repair, then the round goes on), otherwise the run pauses
  (SimulationPaused, with the reason) and nothing of the round is kept;
- an LLM endpoint failing more than `llm_failure_ratio` of its requests in a round pauses the
  run instead of keeping a round of empty answers;
- cancel stops the workers' round (CancelRound, and the streams are dropped, which cancels it
  too) and nothing of that round is kept.

A resumed run starts at the round after the last committed one, with the history read back
from the store (a round played but not yet committed when the manager died is played again).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from backend.rounds.fanout import (
    ConnectWorker,
    PluginRaised,
    RoundResult,
    RoundWorker,
    cancel_round,
    run_round,
)
from backend.rounds.merge import aggregate_of, merge
from backend.rounds.shared_reads import with_shared_reads
from backend.simulations.carried import changed
from backend.simulations.llm_health import endpoint_failure
from backend.simulations.metrics_declared import MetricValue
from backend.simulations.mixture import AgentParts
from backend.simulations.network import (
    NetworkMemory,
    NetworkPlacement,
    NetworkUnplaced,
    hosted_numbers,
    moved_workers,
)
from backend.simulations.outcome import (
    DecisionTable,
    InconsistentRound,
    PluginFailed,
    RoundDecisions,
    RoundOutcome,
    outcome,
)
from backend.simulations.spec import PROBE_TIMEOUT_S, GameSpec, per_worker_requests
from backend.workers.grpc_client import WorkerClient
from backend.workers.plane_errors import WorkerGone, WorkerPlaneError
from populace.plugin import RoundActions, Simulation, agent_numbers
from populace.registry import installed
from worker_server.rpc import worker_pb2 as pb

log = logging.getLogger(__name__)

# Addresses of the live workers hosting the population now (the store decides).
HostsProvider = Callable[[], Awaitable[list[str]]]
# {address: (lowest, highest) agent number it hosts}: what a worker needs of the groups' values.
SpansProvider = Callable[[], Awaitable[dict[str, tuple[int, int]]]]
# A network simulation's placement as the workers are told it (read again when it changed).
NetworkProvider = Callable[[], Awaitable[NetworkPlacement]]
# Re-host lost agents (restore, re-place) until the population is whole or the deadline
# (time.monotonic()) passes; True when whole.
Recovery = Callable[[float], Awaitable[bool]]
# Returns when the worker at this address is known to be gone (offline in the registry).
GoneWatch = Callable[[str], Awaitable[None]]
# Between two tries to get the lost agents of a round hosted again.
RECOVERY_POLL_S = 0.5


class SimulationFailed(RuntimeError):
    """The simulation cannot go on; the message says why, for the user."""


class SimulationPaused(RuntimeError):
    """The run stops before the round in flight is kept, and waits for a resume; the message
    says why."""


class SimulationCancelled(Exception):
    pass


@dataclass(frozen=True)
class FaultPolicy:
    # How long a round waits for lost agents to be hosted again.
    recovery_s: float = 120.0
    # Pause when an endpoint fails more than this share of its requests in a round...
    llm_failure_ratio: float = 0.5
    # ...out of at least this many (a couple of failures among few requests are noise).
    llm_failure_min_requests: int = 10


class RoundListener(Protocol):
    """Called by the environment around each round, in the order the listeners were given.

    Any listener may raise SimulationFailed (e.g. the population was deleted) to stop the run;
    `round_completed` runs for each listener in turn, so persistence goes before events. It
    runs while the next round plays (module docstring): it must not change the game's state.
    """

    async def round_started(self, env: GlobalEnvironment, round_number: int) -> None: ...

    def decisions_arrived(self, env: GlobalEnvironment, round_number: int, answered: int) -> None:
        """Sync and cheap: called for every decision batch (thousands of decisions each)."""

    async def round_completed(
        self, env: GlobalEnvironment, result: RoundOutcome, decisions: DecisionTable
    ) -> None: ...


class GlobalEnvironment:
    def __init__(
        self,
        spec: GameSpec,
        hosts: HostsProvider,
        listeners: Sequence[RoundListener] = (),
        *,
        population_size: int,
        recovery: Recovery | None = None,
        gone: GoneWatch | None = None,
        exclusive: Callable[[], AbstractAsyncContextManager] | None = None,
        faults: FaultPolicy = FaultPolicy(),
        told: Sequence[Told] = (),
        groups: Mapping[str, np.ndarray] | None = None,
        metrics: Sequence[dict[str, MetricValue]] = (),
        group_metrics: Mapping[str, np.ndarray] | None = None,
        played: int = 0,
        on_fault: Callable[[int, str], None] | None = None,
        on_commit: Callable[[asyncio.Task], None] | None = None,
        connect: ConnectWorker = WorkerClient,
        simulation: Simulation | None = None,
        spans: SpansProvider | None = None,
        agent_parts: AgentParts | None = None,
        network: NetworkProvider | None = None,
        agent_groups: Callable[[], Awaitable[np.ndarray]] | None = None,
        network_memory: Callable[[], Awaitable[NetworkMemory]] | None = None,
    ) -> None:
        self.spec = spec
        # A network simulation: who hosts which agents (told to every process with each round),
        # and each agent's group (its connected component) for the plugin's resolve.
        self.network = network
        self._read_agent_groups = agent_groups
        self._agent_groups: np.ndarray | None = None
        # Every agent's last value and streak (read back on resume), to seed agents that move;
        # and the placement the workers were last told.
        self._read_network_memory = network_memory
        self._network_memory: NetworkMemory | None = (
            NetworkMemory.empty(population_size) if network and not played else None
        )
        self._told_placement: NetworkPlacement | None = None
        # Who plays which part of a mixed policy: rounds are broken down by it.
        self.agent_parts = agent_parts
        # The plugin that resolves rounds: the installed one of the spec's name.
        self.simulation = simulation or installed().get(spec.plugin).simulation
        # The workers port: gRPC to worker processes, or (in tests) their code in this process.
        self.connect = connect
        # Told of each round's commit as it starts (agents moved meanwhile wait for it).
        self.on_commit = on_commit or (lambda _task: None)
        # Told (round, what happened) of each fault the run rides out: a worker lost mid-round,
        # a round played again for the agents it left unanswered (the run's timeline shows them).
        self.on_fault = on_fault or (lambda _round, _what: None)
        self.hosts = hosts
        # Without spans, every worker is sent every group's values.
        self.spans = spans
        self.listeners = list(listeners)
        self.recovery = recovery
        self.gone = gone
        # Held around each RunRound: no repair adds agents to a worker while it plays a round.
        self.exclusive = exclusive or contextlib.nullcontext
        self.faults = faults
        self.expected = (np.int64(spec.population_id) << 32) | np.arange(
            population_size, dtype=np.int64
        )
        # What agents were told after each round that told them something, oldest first.
        self.told: list[Told] = list(told)
        # What each group heard after the last round (a simulation played in groups).
        self.groups: dict[str, np.ndarray] = dict(groups or {})
        # Every kept round's metrics, oldest first (the stop rules read them).
        self.metrics: list[dict[str, MetricValue]] = list(metrics)
        # The last kept round's group metrics (the next round's resolve reads them).
        self.group_metrics: dict[str, np.ndarray] = dict(group_metrics or {})
        self.outcomes: list[RoundOutcome] = []
        # Rounds played: committed, or being committed (a resumed run starts after the
        # committed ones).
        self.played = played
        self.round = played
        self.stop_reason: str | None = None
        self.cancelled = False
        # The round in flight's LLM usage so far, per worker and attempt (for live meters).
        self.live_endpoints: dict[str, Sequence[pb.EndpointUsage]] = {}
        # (base_url, model) -> the model ids the endpoint's /v1/models listed at the probe.
        self.served_models: dict[tuple[str, str], list[str]] = {}
        self._clients: dict[str, RoundWorker] = {}
        self._round_id: str | None = None
        self._round_task: asyncio.Task | None = None
        # The last played round's commit (its listeners' round_completed), while it runs.
        self._committing: asyncio.Task | None = None

    @property
    def _keeps_broken_streams(self) -> bool:
        """Whether the decisions a failed worker streamed before it failed are kept (only the
        agents without one are asked again). Not with an LLM policy: its agents read their own
        past choices from the worker's memory, which a broken round does not write, so they are
        asked again whole; nor with segments, whose aggregate needs attributes the workers
        hold."""
        return not self.spec.uses_llm and not self.spec.segment_by

    @property
    def round_in_flight(self) -> bool:
        return self._round_task is not None

    # --- control ---------------------------------------------------------------------------

    def request_stop(self, reason: str) -> None:
        """End the run after the current round (e.g. "converged")."""
        self.stop_reason = reason

    async def cancel(self) -> None:
        """Stop the run: the workers cancel their round in flight; nothing of it is kept."""
        self.cancelled = True
        round_id, task = self._round_id, self._round_task
        if round_id is not None:
            try:
                await cancel_round(list(self._clients.values()), round_id)
            except Exception as exc:  # the dropped streams below cancel it anyway
                log.warning("CancelRound %s failed: %s", round_id, exc)
        if task is not None and not task.done():
            task.cancel()

    async def close(self) -> None:
        for client in self._clients.values():
            try:
                await client.close()
            except Exception:  # closing a channel to a dead worker may complain
                pass
        self._clients.clear()

    def _client(self, address: str) -> RoundWorker:
        client = self._clients.get(address)
        if client is None:
            client = self._clients[address] = self.connect(address)
        return client

    # --- the run ---------------------------------------------------------------------------

    async def probe_llm(self) -> None:
        """Every hosting worker must reach every endpoint (and find its model) before round 1."""
        endpoints = self.spec.endpoints()

        async def one(client: RoundWorker) -> list[str]:
            try:
                reply = await client.probe_llm(endpoints, timeout_s=PROBE_TIMEOUT_S)
            except WorkerGone as exc:
                # A worker fault, not an endpoint's: round 1 waits for its agents to be
                # hosted again (or pauses), like any round that loses a worker.
                log.warning(
                    "simulation %s: worker %s did not answer the LLM probe (%s); its agents "
                    "are recovered in round 1",
                    self.spec.simulation_id,
                    client.address,
                    exc.status,
                )
                return []
            except WorkerPlaneError as exc:
                return [
                    f"worker {client.address} could not probe the LLM endpoints: "
                    f"{exc.status}: {exc.message}"
                ]
            for status in reply.endpoints:
                if status.served_models:
                    key = (status.base_url, status.model)
                    self.served_models.setdefault(key, list(status.served_models))
            return [
                f"LLM endpoint {status.base_url} (model {status.model!r}) is not usable from "
                f"worker {client.address}: {status.error or 'no reason given'}"
                for status in reply.endpoints
                if not status.ok
            ]

        clients = [self._client(address) for address in sorted(await self.hosts())]
        problems = [p for found in await asyncio.gather(*map(one, clients)) for p in found]
        if problems:
            raise SimulationFailed("; ".join(dict.fromkeys(problems)))

    async def run(self) -> None:
        """Play the rounds; returns when the last round (or a stop request) is done and
        committed."""
        try:
            await self._play_rounds()
        except asyncio.CancelledError:
            # The manager is stopping: the commit in flight rolls back, and a resume plays
            # that round again.
            if self._committing is not None:
                self._committing.cancel()
            raise
        except BaseException:
            await self._land_commit(raise_error=False)
            raise
        await self._land_commit()

    async def _play_rounds(self) -> None:
        self._check_cancelled()
        if self.spec.uses_llm:
            # Also when resuming: it tells a still-dead endpoint at once, and a working one has
            # the workers' circuit breakers closed again.
            try:
                await self.probe_llm()
            except SimulationFailed as exc:
                if self.played == 0:
                    raise
                raise SimulationPaused(str(exc)) from None
        for number in range(self.played + 1, self.spec.rounds + 1):
            self._check_cancelled()
            await self.play(number)
            if self.stop_reason is not None:
                return

    async def play(self, number: int) -> RoundOutcome:
        self.round = number
        self.live_endpoints.clear()
        for listener in self.listeners:
            await listener.round_started(self, number)
        self._check_cancelled()
        collected = RoundDecisions(keep_responses=self.spec.store_responses)
        partials: dict[str, pb.PartialAggregate] = {}
        started = time.perf_counter()
        await self._collect(number, collected, partials)
        self._check_cancelled()
        merged = RoundResult(
            merge(partials.values(), self.spec.rule, self.spec.histogram_bins or 101),
            partials,
            collected.answered,
            time.perf_counter() - started,
        )
        if self._read_agent_groups is not None and self._agent_groups is None:
            self._agent_groups = await self._read_agent_groups()  # once a run
        decisions, played, told, stop = await self._resolve(number, merged, collected)
        stored = decisions
        if self.network is not None:
            memory = await self._memory()
            stored = await asyncio.to_thread(self._remember, memory, number, decisions)
        self._keep(number, played, told, stop)
        # One round commits at a time, in order: this one after the one before (whose error,
        # if any, ends the run here).
        await self._land_commit()
        self._committing = asyncio.create_task(self._commit(played, stored))
        self._committing.add_done_callback(self._commit_finished)
        self.on_commit(self._committing)
        return played

    async def _collect(
        self,
        number: int,
        collected: RoundDecisions,
        partials: dict[str, pb.PartialAggregate],
    ) -> None:
        """Every agent's decision into `collected` (and each attempt's partial aggregates into
        `partials`): agents a fault left unanswered are asked again once they are hosted again,
        within the fault policy's wait; SimulationPaused when they cannot be had."""
        only: np.ndarray | None = None
        deadline: float | None = None
        for attempt in range(1, 1_000_000):
            failures = await self._attempt_into(number, attempt, collected, only, partials)
            missing = await asyncio.to_thread(collected.missing, self.expected)
            if len(missing) == 0:
                return
            now = time.monotonic()
            if deadline is None:
                # allow_partial plays on with what is hosted after one repair: no waiting.
                wait_s = 0.0 if self.spec.allow_partial else self.faults.recovery_s
                deadline = now + wait_s
                self._report_unanswered(number, len(missing), wait_s, failures)
            # Past the deadline, allow_partial still gets its one repair, never a loop.
            may_recover = now < deadline or (self.spec.allow_partial and attempt == 1)
            whole = False
            if self.recovery is not None and may_recover:
                whole = await self._recover(deadline)
            if not whole:
                # Those hosted again meanwhile get one more try; the rest cannot be had.
                await self._attempt_into(number, attempt + 1, collected, missing, partials)
                lost = await asyncio.to_thread(collected.missing, self.expected)
                if len(lost) and not self.spec.allow_partial:
                    raise SimulationPaused(await self._unhosted_reason(number, len(lost)))
                collected.add_lost(lost)
                return
            only = missing

    async def _attempt_into(
        self,
        number: int,
        attempt: int,
        collected: RoundDecisions,
        only: np.ndarray | None,
        partials: dict[str, pb.PartialAggregate],
    ) -> Mapping[str, str]:
        """One attempt at the round (for `only` these agents, when given), its partial
        aggregates kept by process and attempt; returns why processes failed, if any did."""
        result = await self._attempt(number, attempt, collected, only)
        for address, aggregate in result.partials.items():
            partials[f"{address}#{attempt}"] = aggregate
        self._check_llm_health(number, result.partials.values())
        return result.failures

    def _report_unanswered(
        self, number: int, missing: int, wait_s: float, failures: Mapping[str, str]
    ) -> None:
        log.warning(
            "simulation %s round %d: %d agents unanswered (%s); waiting up to %.0f s "
            "for them to be hosted again",
            self.spec.simulation_id,
            number,
            missing,
            "; ".join(failures.values()) or "not hosted",
            wait_s,
        )
        self.on_fault(
            number,
            f"round {number}: {missing} agents unanswered; retrying them for up to "
            f"{wait_s:.0f} s once they are hosted again",
        )

    async def _resolve(
        self, number: int, merged: RoundResult, collected: RoundDecisions
    ) -> tuple[DecisionTable, RoundOutcome, Told | None, str | None]:
        """The round's decision table, its outcome by the plugin, what agents are told and
        whether the plugin stops the run."""
        # Sorting, checking and summarising 10^6 decisions takes a good part of a second: off
        # the event loop, so the API and the websockets keep answering during a round.
        try:
            decisions = await asyncio.to_thread(collected.table)
            played = await asyncio.to_thread(
                outcome,
                number,
                merged,
                decisions,
                self.spec.plugin,
                self.simulation,
                self.spec.params,
                self.spec.prices,
                self.agent_parts,
                previous_metrics=self.metrics[-1] if self.metrics else {},
                groups=self._agent_groups,
                previous_group_metrics=self.group_metrics,
            )
            told, stop = self._plugin_after(number, played.metrics)
        except InconsistentRound as exc:
            raise SimulationFailed(f"round {number}: {exc}") from exc
        except PluginFailed as exc:
            log.error("simulation %s: %s", self.spec.simulation_id, exc, exc_info=exc.__cause__)
            raise SimulationPaused(str(exc)) from exc
        return decisions, played, told, stop

    def _keep(self, number: int, played: RoundOutcome, told: Told | None, stop: str | None) -> None:
        """The played round becomes the run's latest: its outcome, metrics and what agents
        hear next; a stop is requested when the run converged or the plugin said so."""
        self.outcomes.append(played)
        self.metrics.append(played.metrics)
        self.group_metrics = played.group_metrics
        self.played = number
        if told is not None:
            self.told.append(told)
        if self.spec.plugin_version is not None:
            # Round r + 1's agents hear round r's groups: a round that resolved none tells none.
            self.groups = played.groups
        if self._converged():
            self.request_stop("converged")
        elif stop is not None:
            self.request_stop(stop)

    def _remember(self, memory: NetworkMemory, number: int, decisions: DecisionTable):
        """Take a network round's decisions into the manager's memory of every agent's value,
        and give what the round stores: in a run that stores changes, only the decisions that
        differ from the agent's last (backend.simulations.carried); otherwise all of them."""
        keep = None
        if self.spec.stores_changes and number > 1 and memory.round == number - 1:
            numbers = agent_numbers(decisions.agent_ids)
            keep = changed(decisions, memory.values, memory.status, numbers)
        memory.played(
            number, RoundActions(number, decisions.agent_ids, decisions.values, decisions.status)
        )
        return decisions if keep is None else decisions.subset(keep)

    async def _memory(self) -> NetworkMemory:
        """The manager's memory of every agent's value (read back once on a resumed run)."""
        if self._network_memory is None:
            assert self._read_network_memory is not None
            self._network_memory = await self._read_network_memory()
        return self._network_memory

    async def _unhosted_reason(self, number: int, lost: int) -> str:
        """Why the round cannot finish, and what to do about it, for the pause reason."""
        try:
            hosts = len(await self.hosts())
        except Exception:  # the reason is still right without the count of hosts
            hosts = None
        where = (
            "no live worker hosts any of its agents"
            if hosts == 0
            else "the workers that hold them are offline or do not answer"
        )
        return (
            f"round {number}: {lost} of {len(self.expected)} agents are not hosted by a live "
            f"worker after {self.faults.recovery_s:g} s (population {self.spec.population_id}: "
            f"{where}); start the workers again (or add workers), repair the population and "
            'resume, or resume with {"allow_partial": true} to play on without them'
        )

    def _plugin_after(
        self, number: int, metrics: dict[str, MetricValue]
    ) -> tuple[Told | None, str | None]:
        """What the plugin makes of the round's metrics: the feedback agents hear next, and a
        reason to stop (PluginFailed when its code raises or gives what cannot be told)."""
        spec = self.spec
        told = feedback_of(spec.plugin, self.simulation, spec.params, number, metrics)
        if told is not None and spec.plugin_version is None:
            as_history([told], spec.plugin)  # the guessing game's workers can take it
        try:
            stop = self.simulation.stop(spec.params, [*self.metrics, metrics])
            if stop is not None and not (isinstance(stop, str) and stop.strip()):
                raise TypeError(f"stop gave {stop!r}: a reason (text) or None")
        except Exception as exc:
            raise PluginFailed(
                f"plugin {self.spec.plugin!r} failed after round {number}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        return told, stop

    def _converged(self) -> bool:
        """The watched metric's last `converge_window` values lie within `converge_tolerance`."""
        window, metric = self.spec.converge_window, self.spec.converge_metric
        if window is None or metric is None:
            return False
        values = [round_metrics.get(metric) for round_metrics in self.metrics[-window:]]
        full = len(values) == window and None not in values
        return full and max(values) - min(values) <= self.spec.converge_tolerance

    async def _commit(self, played: RoundOutcome, decisions: DecisionTable) -> None:
        for listener in self.listeners:
            await listener.round_completed(self, played, decisions)

    def _commit_finished(self, task: asyncio.Task) -> None:
        # A round that could not be stored: the round in flight after it is not kept either.
        if not task.cancelled() and task.exception() is not None and self._round_task:
            self._round_task.cancel()

    def _commit_error(self) -> BaseException | None:
        task = self._committing
        if task is None or not task.done() or task.cancelled():
            return None
        return task.exception()

    async def _land_commit(self, raise_error: bool = True) -> None:
        """Wait for the round being committed, if any, and raise its error (or log it)."""
        task = self._committing
        if task is None:
            return
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():  # this run is being cancelled, not the commit
                raise
        except Exception as exc:
            if raise_error:
                raise
            log.error(
                "simulation %s: a round was not stored: %s",
                self.spec.simulation_id,
                exc,
            )
        finally:
            if task.done():
                self._committing = None

    async def _attempt(
        self, number: int, attempt: int, collected: RoundDecisions, only: np.ndarray | None
    ) -> RoundResult:
        """One RunRound on every live worker hosting the population (only: these agents)."""

        def arrived(address: str, batch: pb.DecisionBatch) -> None:
            collected(address, batch)
            if batch.endpoints:
                # Cumulative per worker and attempt: the latest replaces the one before.
                self.live_endpoints[f"{address}#{attempt}"] = batch.endpoints
            for listener in self.listeners:
                listener.decisions_arrived(self, number, collected.answered)

        # Worker order fixes nothing observable (statistics come from the sorted decisions),
        # but a stable order keeps logs and errors comparable between runs.
        async with self.exclusive():
            return await self._run_attempt(number, collected, only, arrived)

    async def _run_attempt(self, number, collected, only, arrived) -> RoundResult:
        addresses = sorted(await self.hosts())
        clients = [self._client(address) for address in addresses]
        request = self.request(number, only)
        self._round_id = request.round_id
        requests = await self._groups_per_worker(per_worker_requests(request, addresses))
        requests = await self._network_per_worker(requests, number)
        requests = with_shared_reads(requests)
        self._round_task = asyncio.create_task(
            run_round(
                clients,
                requests,
                arrived,
                timeout=self.spec.stream_timeout_s,
                tolerate_failures=True,
                gone=self.gone,
            )
        )
        try:
            result: RoundResult = await self._round_task
        except PluginRaised as exc:
            log.error("simulation %s: round %s: %s", self.spec.simulation_id, number, exc)
            raise SimulationPaused(f"round {number}: {exc}") from exc
        except asyncio.CancelledError:
            if self.cancelled:  # our own cancel() dropped the streams
                raise SimulationCancelled() from None
            error = self._commit_error()
            if error is not None:  # the round before could not be stored (_commit_finished)
                raise error from None
            self._round_task.cancel()  # the run itself is being cancelled (manager stopping)
            raise
        finally:
            self._round_id = self._round_task = None
        self._check_cancelled()
        for address in {c.address for c in clients}:
            if address in result.partials:
                collected.keep(address)
            elif self._keeps_broken_streams:
                kept = collected.salvage(address)
                if kept is not None:
                    values, n_invalid, n_late = kept
                    bins = self.spec.histogram_bins or 101
                    result.partials[f"{address}~kept"] = aggregate_of(
                        values, n_invalid, n_late, self.spec.rule, bins
                    )
            else:
                collected.drop(address)
        for address, why in result.failures.items():
            log.warning("simulation %s: %s", self.spec.simulation_id, why)
            self.on_fault(number, f"round {number}: worker {address} failed: {why}")
        return result

    async def _recover(self, deadline: float) -> bool:
        assert self.recovery is not None
        while True:
            self._check_cancelled()
            if await self.recovery(deadline):
                return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(RECOVERY_POLL_S)

    def _check_llm_health(self, number: int, partials) -> None:
        failing = endpoint_failure(
            partials, self.faults.llm_failure_ratio, self.faults.llm_failure_min_requests
        )
        if failing is not None:
            raise SimulationPaused(f"round {number}: {failing}")

    def request(self, number: int, only: np.ndarray | None = None) -> pb.RunRoundRequest:
        spec = self.spec
        request = pb.RunRoundRequest(
            round_id=f"sim{spec.simulation_id}-r{number}-{uuid.uuid4().hex[:8]}",
            population_id=str(spec.population_id),
            round=number,
            rule=spec.rule,
            policy=spec.policy,
            segment_by=list(spec.segment_by),
            histogram_bins=spec.histogram_bins,
            seed=spec.seed,
            deadline_s=spec.round_deadline_s or 0.0,
            simulation_id=str(spec.simulation_id),
            store_responses=spec.store_responses,
            packed_decisions=True,
        )
        if only is not None:
            request.only.ids.extend(only.tolist())
        if spec.plugin_version is not None:
            request.plugin.CopyFrom(self._plugin_round())
            return request
        request.history.extend(as_history(self.told, spec.plugin))
        # A round without a valid answer tells nothing: the last winning number still stands.
        if self.told:
            request.feedback = self.told[-1].values["winner"]
        return request

    async def _groups_per_worker(
        self, requests: dict[str, pb.RunRoundRequest]
    ) -> dict[str, pb.RunRoundRequest]:
        """Each worker's request with only the groups its agents are in (group values are one
        per group: 10^5 floats a name at 10^6 agents in groups of 10, for every worker)."""
        group_size = self.simulation.group_size(self.spec.params) if self.groups else None
        if not group_size or self.spans is None or self.spec.plugin_version is None:
            return requests
        spans = await self.spans()
        # The requests as built carry every group: copied without them, then given a span each.
        bare = {}
        for request in {id(r): r for r in requests.values()}.values():
            copy = pb.RunRoundRequest()
            copy.CopyFrom(request)
            del copy.plugin.groups[:]
            bare[id(request)] = copy
        # A worker the spans do not know yet (placement just changed) gets every group.
        everyone = (0, max(len(values) for values in self.groups.values()) * group_size)
        out = {}
        for address, request in requests.items():
            lowest, highest = spans.get(address, everyone)
            first, last = lowest // group_size, highest // group_size
            own = pb.RunRoundRequest()
            own.CopyFrom(bare[id(request)])
            own.plugin.groups.extend(
                pb.GroupValues(name=name, values=values[first : last + 1])
                for name, values in self.groups.items()
            )
            own.plugin.group_offset = first
            out[address] = own
        return out

    async def _network_per_worker(
        self, requests: dict[str, pb.RunRoundRequest], number: int
    ) -> dict[str, pb.RunRoundRequest]:
        """A network simulation's requests, each telling its process the placement and which
        peer it is; SimulationPaused when some agents have no live host to hold their values."""
        if self.network is None:
            return requests
        try:
            placement = await self.network()
            await self._seed_moved_agents(placement, number)
            out = {}
            for address, request in requests.items():
                own = pb.RunRoundRequest()
                own.CopyFrom(request)
                own.network.CopyFrom(placement.message_for(address))
                out[address] = own
        except NetworkUnplaced as exc:
            raise SimulationPaused(
                f"round {number}: a network simulation needs every agent hosted: {exc}; "
                "start the workers again or repair the population, then resume"
            ) from exc
        return out

    async def _seed_moved_agents(self, placement: NetworkPlacement, number: int) -> None:
        """Before a round, give the processes whose agents changed since the workers were last
        told (a worker lost and its agents re-placed; a resumed run) their agents' values and
        streaks after the round before: worker to worker values cover the rest."""
        told, self._told_placement = self._told_placement, placement
        if number == 1:
            return
        moved = moved_workers(told, placement)
        if not moved:
            return
        memory = await self._memory()
        if memory.round != number - 1:
            raise SimulationFailed(
                f"round {number}: the manager holds the values of round {memory.round}, not "
                f"{number - 1}"
            )
        spec = self.spec

        async def seed(worker: int) -> None:
            numbers = hosted_numbers(placement, worker)
            request = await asyncio.to_thread(
                memory.seed_for, spec.simulation_id, spec.population_id, numbers
            )
            address = placement.addresses[worker]
            client = self._client(address)
            try:
                await client.seed_values(request)
            except WorkerPlaneError as exc:
                self._told_placement = None  # seed everyone again next time
                raise NetworkUnplaced(
                    f"worker {worker} at {address} could not take its agents' values: "
                    f"{exc.status}: {exc.message}"
                ) from exc

        await asyncio.gather(*(seed(worker) for worker in moved))

    def _plugin_round(self) -> pb.PluginRound:
        """What a plugin's own policies are told: its params, the last feedback, the groups'."""
        spec = self.spec
        last = self.told[-1].values if self.told else {}
        return pb.PluginRound(
            name=spec.plugin,
            version=spec.plugin_version,
            params_json=json.dumps(spec.params.model_dump(mode="json"), separators=(",", ":")),
            feedback_json=json.dumps(last, separators=(",", ":")),
            groups=[
                pb.GroupValues(name=name, values=values) for name, values in self.groups.items()
            ],
        )

    def _check_cancelled(self) -> None:
        if self.cancelled:
            raise SimulationCancelled()


@dataclass(frozen=True)
class Told:
    """What every agent heard after a round: the plugin's feedback, {name: number}."""

    round: int
    values: dict[str, float]


def feedback_of(
    plugin: str, simulation: Simulation, params, number: int, metrics: dict[str, MetricValue]
) -> Told | None:
    """What agents hear after round `number` (None: nothing new): the same for a round just
    played and one read back on resume. PluginFailed when the plugin raises or gives what is not
    {name: finite number}."""
    try:
        told = simulation.feedback(params, metrics)
        if told is None:
            return None
        values = {}
        for name, value in dict(told).items():
            if not isinstance(name, str) or isinstance(value, bool):
                raise TypeError(f"{name!r}: {value!r} is not a named number")
            values[name] = float(value)
            if not math.isfinite(values[name]):
                raise ValueError(f"{name!r}: {value!r} is not finite")
        return Told(number, values)
    except Exception as exc:
        raise PluginFailed(
            f"plugin {plugin!r} failed to give the feedback of round {number}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def as_history(told: Sequence[Told], plugin: str) -> list[pb.RoundFeedback]:
    """The guessing game's history as its workers take it (its feedback's names are the
    message's fields: winner, and mean when agents are told it)."""
    try:
        return [pb.RoundFeedback(round=t.round, **t.values) for t in told]
    except (TypeError, ValueError) as exc:
        raise PluginFailed(
            f"plugin {plugin!r} gave feedback the guessing game's workers cannot take: {exc}"
        ) from exc
