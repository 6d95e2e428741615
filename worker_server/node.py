"""The node supervisor behind `populace worker --procs N`.

It starts N real worker processes (one per core: each has its own GIL and event loop, and
registers with the manager on its own) in N slots, and forwards SIGTERM/SIGINT to them. A child
that crashes (killed by a signal, exit 1, ...) is started again in its slot, with the same index
and, when the base port is fixed, the same port, after a capped exponential backoff; its siblings
keep running. A child whose exit no restart can fix (bad settings or a refused registration,
a rejected join token, a port it cannot bind) stops the whole node with that code, so a broken
node is loud instead of half-alive. A slot whose child exits 0 (stopped, or removed by an
operator) stays empty; the node ends when every slot has.

The restart decisions live in `NodeSlots`, a pure state machine with no processes and no clock
(the caller passes `now`), like lifecycle.py; `_Supervisor` only performs them. The supervisor
imports no gRPC: children are fresh interpreters (`python -m worker_server.process`), never
forks of a process holding gRPC threads.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from pydantic import SecretStr

from worker_server.exit_codes import ExitCode
from worker_server.lifecycle import backoff_delay
from worker_server.settings import WorkerSettings

log = logging.getLogger("populace.node")

POLL_S = 0.1
# A child deregisters (<= 1 s) and stops its server (<= 2 s grace); past this it is killed.
CHILD_STOP_TIMEOUT_S = 10.0
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_MAX_PORT = 65535


# --- The restart policy: a pure state machine -------------------------------------------------

# Exits that a restart would only repeat: the same settings, token and port fail the same way.
FATAL_EXIT_CODES = frozenset({ExitCode.CONFIG, ExitCode.JOIN_TOKEN_REJECTED, ExitCode.BIND_FAILED})
# Exit 0 (stopped, or removed by an operator), or death by the signals a child handles by
# stopping cleanly (it got one before its handler was installed): the child was asked to go.
_STOPPED_RETURNCODES = frozenset({0, -signal.SIGTERM, -signal.SIGINT})


class ExitKind(StrEnum):
    STOPPED = "stopped"  # asked to go: its slot stays empty
    FATAL = "fatal"  # restarting cannot help: the node stops with this code
    CRASHED = "crashed"  # anything else (SIGKILL, a segfault, exit 1...): restart the slot


def classify_exit(returncode: int) -> ExitKind:
    if returncode in _STOPPED_RETURNCODES:
        return ExitKind.STOPPED
    if returncode in FATAL_EXIT_CODES:
        return ExitKind.FATAL
    return ExitKind.CRASHED


@dataclass(frozen=True)
class RestartPolicy:
    """Capped exponential backoff between restarts of one slot: base, 2*base, ... up to cap."""

    base_s: float = 0.5
    cap_s: float = 30.0
    # A child that stayed up this long failed for a new reason: its next restart is quick again.
    stable_s: float = 60.0

    def delay(self, crashes: int) -> float:
        return backoff_delay(crashes, base_s=self.base_s, cap_s=self.cap_s)


class SlotPhase(StrEnum):
    RUNNING = "running"  # a child process is (or may still be) alive in this slot
    WAITING = "waiting"  # its child crashed; restart at restart_at
    ENDED = "ended"  # no child and none to come


@dataclass
class Slot:
    index: int
    started_at: float
    phase: SlotPhase = SlotPhase.RUNNING
    # Crashes since the slot's child last stayed up for policy.stable_s; drives the backoff.
    crashes: int = 0
    restarts: int = 0
    restart_at: float | None = None


@dataclass(frozen=True)
class Ended:
    """The child stopped cleanly; its slot stays empty."""

    index: int
    returncode: int


@dataclass(frozen=True)
class RestartLater:
    index: int
    returncode: int
    delay_s: float
    restart: int  # 1 for the slot's first restart, 2 for its second, ...


@dataclass(frozen=True)
class NodeFailed:
    """The node stops (or, when already stopping, will end) with exit_code."""

    index: int
    returncode: int
    exit_code: int
    while_stopping: bool


ExitOutcome = Ended | RestartLater | NodeFailed


def as_exit_code(returncode: int) -> int:
    # Shell convention for "killed by signal N", so a caller never sees a negative code.
    return 128 - returncode if returncode < 0 else returncode


class NodeSlots:
    """What the supervisor does when a child exits, as a state machine over N slots.

    No processes and no clock: the driver reports exits and starts with the time `now` (any
    monotonic clock) and performs what the answers ask for.

        running --crashed--> waiting --due(), then started()--> running
        running --stopped (exit 0, SIGTERM)--> ended
        running --fatal exit--> ended, and the node stops
        waiting --the node stops--> ended

    Once stopping, nothing is restarted, and the first non-clean exit sets the node's code.
    """

    def __init__(self, procs: int, *, now: float, policy: RestartPolicy | None = None) -> None:
        if procs < 1:
            raise ValueError("procs must be >= 1")
        self.policy = policy or RestartPolicy()
        self.slots = [Slot(index=i, started_at=now) for i in range(procs)]
        self.stopping = False
        self.failure: int | None = None

    @property
    def finished(self) -> bool:
        return all(slot.phase is SlotPhase.ENDED for slot in self.slots)

    @property
    def exit_code(self) -> int:
        return self.failure if self.failure is not None else ExitCode.OK

    def exited(self, index: int, returncode: int, *, now: float) -> ExitOutcome:
        slot = self.slots[index]
        if slot.phase is not SlotPhase.RUNNING:
            raise ValueError(f"slot {index} has no running child ({slot.phase.value})")
        kind = classify_exit(returncode)
        if kind is ExitKind.STOPPED:
            slot.phase = SlotPhase.ENDED
            return Ended(index, returncode)
        if self.stopping or kind is ExitKind.FATAL:
            slot.phase = SlotPhase.ENDED
            was_stopping = self.stopping
            self.fail(as_exit_code(returncode))
            return NodeFailed(index, returncode, self.exit_code, while_stopping=was_stopping)
        if now - slot.started_at >= self.policy.stable_s:
            slot.crashes = 0
        return self._restart_later(slot, returncode, now=now)

    def due(self, now: float) -> list[int]:
        """Slots whose restart time has come; the driver starts each and reports started()."""
        if self.stopping:
            return []
        return [
            slot.index
            for slot in self.slots
            if slot.phase is SlotPhase.WAITING
            and slot.restart_at is not None
            and slot.restart_at <= now
        ]

    def started(self, index: int, *, now: float) -> None:
        slot = self.slots[index]
        if slot.phase is not SlotPhase.WAITING or self.stopping:
            raise ValueError(f"slot {index} is not waiting for a restart ({slot.phase.value})")
        slot.phase = SlotPhase.RUNNING
        slot.started_at = now
        slot.restart_at = None
        slot.restarts += 1

    def start_failed(self, index: int, *, now: float) -> RestartLater:
        """The restart itself failed (fork or exec error): try again after a longer delay."""
        slot = self.slots[index]
        if slot.phase is not SlotPhase.WAITING or self.stopping:
            raise ValueError(f"slot {index} is not waiting for a restart ({slot.phase.value})")
        return self._restart_later(slot, ExitCode.ERROR, now=now)

    def _restart_later(self, slot: Slot, returncode: int, *, now: float) -> RestartLater:
        slot.crashes += 1
        delay = self.policy.delay(slot.crashes)
        slot.phase = SlotPhase.WAITING
        slot.restart_at = now + delay
        return RestartLater(slot.index, returncode, delay, restart=slot.restarts + 1)

    def fail(self, exit_code: int) -> None:
        """Stop the node, and end with exit_code unless an earlier failure set the code."""
        if self.failure is None:
            self.failure = exit_code
        self.stop()

    def stop(self) -> None:
        """No more restarts: slots waiting for one end now, running ones when their child exits."""
        self.stopping = True
        for slot in self.slots:
            if slot.phase is SlotPhase.WAITING:
                slot.phase = SlotPhase.ENDED
                slot.restart_at = None


# --- Ports, environment and command of a child ------------------------------------------------


def child_port(base_port: int, index: int) -> int:
    """The port rule: 0 lets every process pick a free port; P>0 gives process i port P+i."""
    if index < 0:
        raise ValueError("index must be >= 0")
    return 0 if base_port == 0 else base_port + index


def child_ports(base_port: int, procs: int) -> list[int]:
    if procs < 1:
        raise ValueError("procs must be >= 1")
    ports = [child_port(base_port, i) for i in range(procs)]
    if ports[-1] > _MAX_PORT:
        raise ValueError(
            f"--port {base_port} with --procs {procs} needs ports up to {ports[-1]} (max {_MAX_PORT})"
        )
    return ports


def child_env(
    settings: WorkerSettings,
    *,
    port: int,
    base_env: Mapping[str, str] | None = None,
    metrics_port: int = 0,
) -> dict[str, str]:
    """The environment of one child: its settings as POPULACE_* variables.

    Env rather than argv, because argv (and so the join token) is visible to every user via `ps`.
    """
    env = dict(os.environ if base_env is None else base_env)
    prefix = WorkerSettings.model_config.get("env_prefix", "POPULACE_")
    values = settings.model_dump()
    values["port"] = port
    values["metrics_port"] = metrics_port  # the port rule again: process i serves on base+i
    for name, value in values.items():
        key = f"{prefix}{name}".upper()
        if isinstance(value, SecretStr):  # the join token, the RPC secret
            value = value.get_secret_value()
        if value is None:
            env.pop(key, None)
        else:
            env[key] = str(value)
    # The child must run the same worker_server code as this supervisor, even from a source tree.
    source_root = str(Path(__file__).resolve().parent.parent)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if source_root not in paths:
        env["PYTHONPATH"] = os.pathsep.join([source_root, *paths])
    return env


def child_command(*, parent_pid: int, index: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "worker_server.process",
        "--parent-pid",
        str(parent_pid),
        "--index",
        str(index),
    ]


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    reasons = {
        ExitCode.ERROR: "crashed",
        ExitCode.CONFIG: "had bad settings or a refused request",
        ExitCode.JOIN_TOKEN_REJECTED: "had its join token rejected",
        ExitCode.BIND_FAILED: "could not bind its gRPC port",
    }
    reason = reasons.get(returncode, "failed")
    return f"exited with code {returncode} ({reason})"


# --- The supervisor: performs what NodeSlots decides -------------------------------------------


@dataclass
class _Child:
    index: int
    port: int
    process: subprocess.Popen[bytes]
    returncode: int | None = None


def _say(message: str) -> None:
    # stderr, not only the log: an operator must see why a node restarts or stops.
    print(f"populace worker: {message}", file=sys.stderr, flush=True)


@dataclass
class _Supervisor:
    settings: WorkerSettings
    ports: list[int]
    slots: NodeSlots
    # The current (or last) child of each slot, by index.
    children: dict[int, _Child] = field(default_factory=dict)
    stop_requested: bool = False
    stop_deadline: float | None = None

    def on_signal(self, signum: int, _frame: object) -> None:
        # Only a flag: the loop acts on it, so a signal never lands in the middle of a restart.
        if not self.stop_requested:
            log.info("received %s: stopping the worker processes", signal.Signals(signum).name)
        self.stop_requested = True

    def _label(self, child: _Child) -> str:
        return f"process {child.index + 1}/{len(self.ports)} (pid {child.process.pid})"

    def start(self, index: int) -> _Child:
        port = self.ports[index]
        process = subprocess.Popen(
            child_command(parent_pid=os.getpid(), index=index),
            env=child_env(
                self.settings,
                port=port,
                metrics_port=child_port(self.settings.metrics_port, index),
            ),
            stdin=subprocess.DEVNULL,
        )
        child = self.children[index] = _Child(index=index, port=port, process=process)
        return child

    def start_all(self) -> None:
        try:
            for index in range(len(self.ports)):
                self.start(index)
        except OSError as exc:
            _say(f"cannot start a worker process ({exc})")
            self.slots.fail(ExitCode.ERROR)

    def restart_due(self, now: float) -> None:
        for index in self.slots.due(now):
            try:
                child = self.start(index)
            except OSError as exc:
                retry = self.slots.start_failed(index, now=now)
                _say(
                    f"cannot restart process {index + 1}/{len(self.ports)} ({exc}); "
                    f"trying again in {retry.delay_s:.1f}s"
                )
                continue
            self.slots.started(index, now=now)
            port = f"port {child.port}" if child.port else "a free port"
            _say(f"restarted {self._label(child)} on {port}")

    def stop_all(self) -> None:
        """SIGTERM every live child once; they deregister and exit 0."""
        if self.stop_deadline is not None:
            return
        self.stop_deadline = time.monotonic() + CHILD_STOP_TIMEOUT_S
        for child in self.live():
            _send(child, signal.SIGTERM)

    def live(self) -> list[_Child]:
        return [child for child in self.children.values() if child.returncode is None]

    def reap(self, now: float) -> None:
        for child in self.live():
            returncode = child.process.poll()
            if returncode is None:
                continue
            child.returncode = returncode
            outcome = self.slots.exited(child.index, returncode, now=now)
            if isinstance(outcome, Ended):
                log.info("%s exited cleanly", self._label(child))
            elif isinstance(outcome, RestartLater):
                _say(
                    f"{self._label(child)} {describe_exit(returncode)}; restarting it in "
                    f"{outcome.delay_s:.1f}s (restart {outcome.restart} of this process)"
                )
            elif outcome.while_stopping:
                _say(f"{self._label(child)} {describe_exit(returncode)} while stopping")
            else:
                _say(
                    f"{self._label(child)} {describe_exit(returncode)}; "
                    "restarting cannot fix that: stopping the other processes"
                )

    def kill_overdue(self) -> None:
        if self.stop_deadline is None or time.monotonic() < self.stop_deadline:
            return
        for child in self.live():
            log.warning("%s ignored SIGTERM: killing it", self._label(child))
            _send(child, signal.SIGKILL)

    def run(self) -> int:
        while True:
            now = time.monotonic()
            self.reap(now)
            if self.stop_requested:
                self.slots.stop()
            if self.slots.stopping:
                self.stop_all()
            else:
                self.restart_due(now)
            if self.slots.finished:
                return self.slots.exit_code
            self.kill_overdue()
            time.sleep(POLL_S)


def _send(child: _Child, signum: signal.Signals) -> None:
    try:
        child.process.send_signal(signum)
    except ProcessLookupError:  # exited between poll() and now
        pass


def run_node(settings: WorkerSettings, *, policy: RestartPolicy | None = None) -> int:
    """Run `settings.procs` worker processes until they stop; returns the exit code of the node.

    0 when every process stopped cleanly (SIGTERM/SIGINT, or each removed by an operator);
    crashed processes are restarted meanwhile (see NodeSlots). Otherwise the code of the first
    process whose exit no restart can fix (see exit_codes.ExitCode), after the others were stopped.
    """
    try:
        ports = child_ports(settings.port, settings.procs)
        if settings.metrics_port and settings.metrics_port + settings.procs - 1 > _MAX_PORT:
            raise ValueError(
                f"--metrics-port {settings.metrics_port} with --procs {settings.procs} needs "
                f"ports up to {settings.metrics_port + settings.procs - 1} (max {_MAX_PORT})"
            )
    except ValueError as exc:
        _say(str(exc))
        return ExitCode.CONFIG
    slots = NodeSlots(len(ports), now=time.monotonic(), policy=policy)
    supervisor = _Supervisor(settings, ports, slots)
    previous = {}
    try:
        for signum in _STOP_SIGNALS:
            previous[signum] = signal.signal(signum, supervisor.on_signal)
    except ValueError:  # not the main thread: the caller has to stop us some other way
        log.warning("run_node is not in the main thread: SIGTERM/SIGINT are not forwarded")
    try:
        log.info(
            "starting %d worker processes for manager %s", settings.procs, settings.manager_base_url
        )
        supervisor.start_all()
        return supervisor.run()
    finally:
        # Whatever happened above (even KeyboardInterrupt in the supervisor), leave no child behind.
        if supervisor.live():
            supervisor.stop_all()
            deadline = time.monotonic() + CHILD_STOP_TIMEOUT_S
            for child in supervisor.live():
                try:
                    child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    _send(child, signal.SIGKILL)
                    child.process.wait()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
