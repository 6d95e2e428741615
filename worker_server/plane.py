"""The worker plane of one process (register, heartbeat, deregister), on a thread of its own.

A worker process's event loop can be busy for seconds at a stretch: a round over 10^5 agents
reads thousands of answer distributions on it. Heartbeats sent from that loop waited their turn
behind the round, and the manager declared a live, working process dead (issue 26, item 6). So
the plane runs here, on a thread with its own event loop and its own HTTP client: nothing asyncio
is shared with the process's main loop. What the main loop owns (the lifecycle's inputs, the
stats) crosses over as plain values.

A beat alone would now say "the process exists", not "it works": a main loop stuck in one call
would still beat. So the main loop advances a `LoopProgress` every tick, each heartbeat reports
how long ago it last did (`loop_lag_s`), and a loop silent for LOOP_HUNG_S is a hung process:
the thread withholds heartbeats until the loop moves again, so the manager's TTL takes it
offline exactly as it would a dead one.

The decisions stay in lifecycle.py (a pure state machine); this thread is its only writer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import random
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from populace.registry import installed
from worker_server.exit_codes import ExitCode
from worker_server.labels import parse_labels
from worker_server.lifecycle import Heartbeat, Register, RegistrationLifecycle, Shutdown, StopReason
from worker_server.manager_client import (
    HeartbeatReport,
    JoinTokenRejected,
    ManagerClient,
    ManagerRejected,
    ManagerUnavailable,
    UnknownWorker,
    WorkerRemoved,
)
from worker_server.stats import LoopProgress

log = logging.getLogger("populace.worker")

# How often we check that the supervisor is still alive; orphans must go within ~2 s.
PARENT_POLL_S = 0.5
# A main loop that has not run for this long is hung, not busy: no round yields this rarely
# (the sub-environment and the LLM policy give the loop a turn every few milliseconds).
LOOP_HUNG_S = 60.0

T = TypeVar("T")


class _Stopped(Exception):
    """The awaited call was abandoned because the process is stopping."""


@dataclass(frozen=True)
class PlaneIdentity:
    """What registration says about the process (all fixed once its server listens)."""

    node: str
    address: str
    capacity: int
    version: str
    slot: int
    rpc_secret: str
    tls: bool
    labels: str


class PlaneThread:
    """Runs the registration lifecycle on a daemon thread until it shuts down.

    `report()` builds a heartbeat's stats; it is called on this thread, so it must only read
    plain values the main loop publishes. `parent_pid()` is the supervisor to outlive (None:
    no supervisor)."""

    def __init__(
        self,
        lifecycle: RegistrationLifecycle,
        identity: PlaneIdentity,
        manager_url: str,
        make_client: Callable[[], ManagerClient],
        report: Callable[[], HeartbeatReport],
        progress: LoopProgress,
        parent_pid: Callable[[], int | None],
        *,
        loop_hung_s: float | None = None,
    ) -> None:
        self.lifecycle = lifecycle
        self.identity = identity
        self.manager_url = manager_url
        self.loop_hung_s = LOOP_HUNG_S if loop_hung_s is None else loop_hung_s
        self._make_client = make_client
        self._report = report
        self._progress = progress
        self._parent_pid = parent_pid
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._early_stop: StopReason | None = None  # asked before the thread's loop ran
        self._last_beat_at = 0.0
        self._withheld = False
        self.exit_code: concurrent.futures.Future[int] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._main, name="populace-plane", daemon=True)

    def start(self) -> concurrent.futures.Future[int]:
        # Running from now on: a caller giving up on it cannot cancel what the thread will set.
        self.exit_code.set_running_or_notify_cancel()
        self._thread.start()
        return self.exit_code

    def join(self, timeout_s: float | None = None) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def stop(self, reason: StopReason) -> None:
        """Ask the lifecycle to stop (from any thread); the first reason wins."""
        with self._lock:
            loop = self._loop
            if loop is None:
                self._early_stop = self._early_stop or reason
                return
        with contextlib.suppress(RuntimeError):  # the loop already closed: nothing to stop
            loop.call_soon_threadsafe(self._stop_here, reason)

    # -- on the plane's thread ----------------------------------------------------------------

    def _main(self) -> None:
        try:
            code = asyncio.run(self._run())
        except BaseException as exc:  # never leave the main loop waiting for an answer
            self.exit_code.set_exception(exc)
        else:
            self.exit_code.set_result(code)

    async def _run(self) -> int:
        self._stop_event = asyncio.Event()
        with self._lock:
            self._loop = asyncio.get_running_loop()
            early = self._early_stop
        if early is not None:
            self._stop_here(early)
        watcher = asyncio.create_task(self._watch_parent())
        client = self._make_client()
        try:
            return await self._drive(client)
        except Exception:
            log.exception("worker process crashed")
            await self._deregister_quietly(client, self.lifecycle.worker_id)
            return ExitCode.ERROR
        finally:
            watcher.cancel()
            await client.aclose()
            with self._lock:
                self._loop = None

    def _stop_here(self, reason: StopReason) -> None:
        if not self.lifecycle.stopping:
            log.info("stopping (%s)", reason.value)
        self.lifecycle.stop(reason)
        assert self._stop_event is not None
        self._stop_event.set()

    async def _drive(self, client: ManagerClient) -> int:
        url = self.manager_url
        while True:
            action = self.lifecycle.next_action()
            if isinstance(action, Shutdown):
                await self._deregister_quietly(client, action.deregister_id)
                log.info("shut down (%s), exit code %d", action.reason.value, action.exit_code)
                return int(action.exit_code)
            try:
                await self._until_stopped(asyncio.sleep(self._delay(action)))
                if isinstance(action, Register):
                    await self._register(client)
                else:
                    await self._heartbeat(client, action)
            except _Stopped:
                continue
            except UnknownWorker as exc:
                log.warning(
                    "manager does not know worker %s (%s): registering again",
                    self.lifecycle.worker_id,
                    exc,
                )
                self.lifecycle.unknown_worker()
            except WorkerRemoved as exc:
                log.info("worker %s was removed by the manager (%s)", self.lifecycle.worker_id, exc)
                self.lifecycle.removed()
            except JoinTokenRejected as exc:
                _fail(f"the manager at {url} rejected the join token ({exc})")
                self.lifecycle.join_token_rejected()
            except ManagerRejected as exc:
                _fail(f"the manager at {url} refused our request ({exc})")
                self.lifecycle.rejected()
            except ManagerUnavailable as exc:
                self.lifecycle.manager_unavailable()
                retry_in = self.lifecycle.next_action()
                log.warning(
                    "waiting for manager at %s (%s); retrying in about %.1fs",
                    url,
                    exc,
                    getattr(retry_in, "delay_s", 0.0),
                )

    def _delay(self, action: Register | Heartbeat) -> float:
        if self.lifecycle.failures:
            # Jitter spreads the retries of a whole cluster after a manager restart.
            return action.delay_s * random.uniform(0.5, 1.0)
        if isinstance(action, Heartbeat):
            # A steady cadence: the time the last heartbeat took counts toward the interval.
            return max(0.0, action.delay_s - (time.monotonic() - self._last_beat_at))
        return action.delay_s

    async def _register(self, client: ManagerClient) -> None:
        identity = self.identity
        registration = await self._until_stopped(
            client.register(
                node=identity.node,
                address=identity.address,
                pid=os.getpid(),
                capacity=identity.capacity,
                version=identity.version,
                slot=identity.slot,
                rpc_secret=identity.rpc_secret,
                tls=identity.tls,
                labels=parse_labels(identity.labels),
                # A launch is refused up front where a host cannot run the run's plugin.
                plugins=installed().versions(),
            )
        )
        again = self.lifecycle.registrations > 0
        self.lifecycle.registered(
            registration.worker_id, registration.heartbeat_interval_s, registration.ttl_s
        )
        self._last_beat_at = time.monotonic()
        if not self.lifecycle.stopping:
            print(
                f"worker pid={os.getpid()} serving gRPC on {identity.address}, "
                f"{'re-registered' if again else 'registered'} as worker {registration.worker_id}",
                flush=True,
            )

    async def _heartbeat(self, client: ManagerClient, action: Heartbeat) -> None:
        self._last_beat_at = time.monotonic()
        lag = self._progress.lag_s()
        if lag >= self.loop_hung_s:
            # Hung, not busy: stay silent so the manager's TTL takes us offline (module doc).
            if not self._withheld:
                log.error(
                    "the event loop has not run for %.0fs: withholding heartbeats until it does",
                    lag,
                )
            self._withheld = True
            return
        if self._withheld:
            log.warning("the event loop runs again: heartbeats resume")
            self._withheld = False
        report = self._report()
        answer = await self._until_stopped(client.heartbeat(action.worker_id, report))
        if answer.state != self.lifecycle.manager_state:
            log.info("manager reports worker %s as %s", action.worker_id, answer.state)
        if answer.heartbeat_interval_s not in (None, self.lifecycle.heartbeat_interval_s):
            log.info("manager asks for a heartbeat every %.1fs", answer.heartbeat_interval_s)
        self.lifecycle.heartbeat_ok(answer.state, answer.heartbeat_interval_s, answer.ttl_s)

    async def _until_stopped(self, awaitable: Awaitable[T]) -> T:
        """Await, but give up as soon as a stop is requested so shutdown never waits on the network."""
        assert self._stop_event is not None
        task = asyncio.ensure_future(awaitable)
        stop = asyncio.create_task(self._stop_event.wait())
        try:
            await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
        if task.done():
            return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        raise _Stopped

    async def _deregister_quietly(self, client: ManagerClient, worker_id: int | None) -> None:
        if worker_id is None:
            return
        try:
            await client.deregister(worker_id)
            log.info("deregistered worker %s", worker_id)
        except Exception as exc:  # best effort: the manager's TTL marks us offline anyway
            log.warning("could not deregister worker %s (%s)", worker_id, exc)

    async def _watch_parent(self) -> None:
        """Here rather than on the main loop: an orphan must go even while a round keeps that
        loop busy."""
        while True:
            parent = self._parent_pid()
            # Reparenting (to init or a subreaper) changes our ppid: the supervisor is gone.
            if parent is not None and os.getppid() != parent:
                log.warning("supervisor pid %s is gone: shutting down", parent)
                self._stop_here(StopReason.PARENT_DIED)
                return
            await asyncio.sleep(PARENT_POLL_S)


def _fail(message: str) -> None:
    print(f"populace worker: {message}", file=sys.stderr, flush=True)
