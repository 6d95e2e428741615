"""The global environment: the simulation's game state on the manager, itself run like an agent.

It holds the state of the game (round, history of winning numbers), runs each round through the
workers' sub-environments (one RunRound per worker process hosting the population), turns what
comes back into the round's outcome (target, winners, statistics), and calls its listeners:
persistence, events, the stop-when-converged rule, guards. The winning number of a round is the
next round's feedback, and every earlier round's outcome is the agents' history.

Failure rules: a worker failing mid-round fails the simulation (SimulationFailed names the
worker and its reason) and the round is not kept; cancel stops the workers' round (CancelRound,
and the streams are dropped, which cancels it too) and nothing of that round is kept.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from typing import Protocol

import grpc

from backend.rounds.fanout import RoundFailed, RoundResult, cancel_round, run_round
from backend.simulations.outcome import (
    DecisionTable,
    InconsistentRound,
    RoundDecisions,
    RoundOutcome,
    outcome,
)
from backend.simulations.spec import PROBE_TIMEOUT_S, GameSpec
from backend.workers.grpc_client import WorkerClient
from worker_server.rpc import worker_pb2 as pb

log = logging.getLogger(__name__)


class SimulationFailed(RuntimeError):
    """The simulation cannot go on; the message says why, for the user."""


class SimulationCancelled(Exception):
    pass


class RoundListener(Protocol):
    """Called by the environment around each round, in the order the listeners were given.

    Any listener may raise SimulationFailed (e.g. the population was deleted) to stop the run;
    `round_completed` runs for each listener in turn, so persistence goes before events.
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
        clients: Sequence[WorkerClient],
        listeners: Sequence[RoundListener] = (),
    ) -> None:
        self.spec = spec
        # Worker order fixes nothing observable (statistics come from the sorted decisions),
        # but a stable order keeps logs and errors comparable between runs.
        self.clients = sorted(clients, key=lambda c: c.address)
        self.listeners = list(listeners)
        self.history: list[pb.RoundFeedback] = []
        self.outcomes: list[RoundOutcome] = []
        self.round = 0
        self.stop_reason: str | None = None
        self.cancelled = False
        self._round_id: str | None = None
        self._round_task: asyncio.Task | None = None

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
                await cancel_round(self.clients, round_id)
            except Exception as exc:  # the dropped streams below cancel it anyway
                log.warning("CancelRound %s failed: %s", round_id, exc)
        if task is not None and not task.done():
            task.cancel()

    # --- the run ---------------------------------------------------------------------------

    async def probe_llm(self) -> None:
        """Every hosting worker must reach every endpoint (and find its model) before round 1."""
        endpoints = self.spec.endpoints()

        async def one(client: WorkerClient) -> list[str]:
            try:
                reply = await client.probe_llm(endpoints, timeout_s=PROBE_TIMEOUT_S)
            except grpc.aio.AioRpcError as exc:
                return [
                    f"worker {client.address} could not probe the LLM endpoints: "
                    f"{exc.code().name}: {exc.details()}"
                ]
            return [
                f"LLM endpoint {status.base_url} (model {status.model!r}) is not usable from "
                f"worker {client.address}: {status.error or 'no reason given'}"
                for status in reply.endpoints
                if not status.ok
            ]

        problems = [p for found in await asyncio.gather(*map(one, self.clients)) for p in found]
        if problems:
            raise SimulationFailed("; ".join(dict.fromkeys(problems)))

    async def run(self) -> None:
        """Play the rounds; returns when the last round (or a stop request) is done."""
        self._check_cancelled()
        if self.spec.uses_llm:
            await self.probe_llm()
        for number in range(1, self.spec.rounds + 1):
            self._check_cancelled()
            await self.play(number)
            if self.stop_reason is not None:
                return

    async def play(self, number: int) -> RoundOutcome:
        self.round = number
        for listener in self.listeners:
            await listener.round_started(self, number)
        self._check_cancelled()
        collected = RoundDecisions(keep_responses=self.spec.store_responses)

        def arrived(address: str, batch: pb.DecisionBatch) -> None:
            collected(address, batch)
            for listener in self.listeners:
                listener.decisions_arrived(self, number, collected.answered)

        request = self.request(number)
        self._round_id = request.round_id
        self._round_task = asyncio.create_task(
            run_round(self.clients, request, arrived, timeout=self.spec.stream_timeout_s)
        )
        try:
            result: RoundResult = await self._round_task
        except asyncio.CancelledError:
            if self.cancelled:  # our own cancel() dropped the streams
                raise SimulationCancelled() from None
            self._round_task.cancel()  # the run itself is being cancelled (manager stopping)
            raise
        except RoundFailed as exc:
            self._check_cancelled()
            raise SimulationFailed(f"round {number}: {exc}") from exc
        finally:
            self._round_id = self._round_task = None
        self._check_cancelled()
        # Sorting, checking and summarising 10^6 decisions takes a good part of a second: off
        # the event loop, so the API and the websockets keep answering during a round.
        try:
            decisions = await asyncio.to_thread(collected.table)
        except InconsistentRound as exc:
            raise SimulationFailed(f"round {number}: {exc}") from exc
        played = await asyncio.to_thread(
            outcome, number, result, decisions, self.spec.ratio, self.spec.offset
        )
        self.outcomes.append(played)
        if played.winner_value is not None:
            feedback = pb.RoundFeedback(round=number, winner=played.winner_value)
            if self.spec.tell_mean:
                feedback.mean = played.mean
            self.history.append(feedback)
        for listener in self.listeners:
            await listener.round_completed(self, played, decisions)
        return played

    def request(self, number: int) -> pb.RunRoundRequest:
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
            history=self.history,
            store_responses=spec.store_responses,
        )
        # A round without a valid answer tells nothing: the last winning number still stands.
        if self.history:
            request.feedback = self.history[-1].winner
        return request

    def _check_cancelled(self) -> None:
        if self.cancelled:
            raise SimulationCancelled()
