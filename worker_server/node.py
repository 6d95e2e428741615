"""The node supervisor behind `populace worker --procs N`.

It starts N real worker processes (one per core: each has its own GIL and event loop, and
registers with the manager on its own), forwards SIGTERM/SIGINT to them, and fails as a whole
when one of them fails, so a broken node is loud instead of half-alive. It imports no gRPC:
children are fresh interpreters (`python -m worker_server.process`), never forks of a process
holding gRPC threads.
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
from pathlib import Path

from worker_server.exit_codes import ExitCode
from worker_server.settings import WorkerSettings

log = logging.getLogger("populace.node")

POLL_S = 0.1
# A child deregisters (<= 1 s) and stops its server (<= 2 s grace); past this it is killed.
CHILD_STOP_TIMEOUT_S = 10.0
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_MAX_PORT = 65535


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
    settings: WorkerSettings, *, port: int, base_env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The environment of one child: its settings as POPULACE_* variables.

    Env rather than argv, because argv (and so the join token) is visible to every user via `ps`.
    """
    env = dict(os.environ if base_env is None else base_env)
    prefix = WorkerSettings.model_config.get("env_prefix", "POPULACE_")
    values = settings.model_dump()
    values["join_token"] = settings.join_token.get_secret_value()
    values["port"] = port
    for name, value in values.items():
        key = f"{prefix}{name}".upper()
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


def _as_exit_code(returncode: int) -> int:
    # Shell convention for "killed by signal N", so a caller never sees a negative code.
    return 128 - returncode if returncode < 0 else returncode


@dataclass
class _Child:
    index: int
    port: int
    process: subprocess.Popen[bytes]
    returncode: int | None = None


@dataclass
class _Supervisor:
    settings: WorkerSettings
    children: list[_Child] = field(default_factory=list)
    stop_requested: bool = False
    stop_deadline: float | None = None
    failure: int | None = None

    def on_signal(self, signum: int, _frame: object) -> None:
        if not self.stop_requested:
            live = sum(child.returncode is None for child in self.children)
            log.info("received %s: stopping %d worker processes", signal.Signals(signum).name, live)
        self.stop_requested = True

    def spawn(self, ports: list[int]) -> None:
        for index, port in enumerate(ports):
            process = subprocess.Popen(
                child_command(parent_pid=os.getpid(), index=index),
                env=child_env(self.settings, port=port),
                stdin=subprocess.DEVNULL,
            )
            self.children.append(_Child(index=index, port=port, process=process))

    def stop_all(self) -> None:
        """SIGTERM every live child once; they deregister and exit 0."""
        if self.stop_deadline is not None:
            return
        self.stop_deadline = time.monotonic() + CHILD_STOP_TIMEOUT_S
        for child in self.children:
            if child.returncode is None:
                _send(child, signal.SIGTERM)

    def reap(self) -> None:
        for child in self.children:
            if child.returncode is not None:
                continue
            returncode = child.process.poll()
            if returncode is None:
                continue
            child.returncode = returncode
            stopping = self.stop_deadline is not None
            # A child caught by our SIGTERM before it installed its handler dies of it: that is a
            # requested stop too, not a failure.
            requested = stopping and returncode in (-signal.SIGTERM, -signal.SIGINT)
            if returncode == 0 or requested:
                log.info(
                    "worker process %d (pid %d) exited cleanly", child.index, child.process.pid
                )
                continue
            if self.failure is None and not stopping:
                self.failure = _as_exit_code(returncode)
                print(
                    f"populace worker: process {child.index + 1}/{len(self.children)} "
                    f"(pid {child.process.pid}) {describe_exit(returncode)}; "
                    "stopping the other processes",
                    file=sys.stderr,
                    flush=True,
                )
            elif self.failure is None:
                self.failure = _as_exit_code(returncode)
                print(
                    f"populace worker: process {child.index + 1} (pid {child.process.pid}) "
                    f"{describe_exit(returncode)} while stopping",
                    file=sys.stderr,
                    flush=True,
                )

    def kill_overdue(self) -> None:
        if self.stop_deadline is None or time.monotonic() < self.stop_deadline:
            return
        for child in self.children:
            if child.returncode is None:
                log.warning(
                    "worker process %d (pid %d) ignored SIGTERM: killing it",
                    child.index,
                    child.process.pid,
                )
                _send(child, signal.SIGKILL)

    def run(self) -> int:
        while True:
            self.reap()
            if all(child.returncode is not None for child in self.children):
                return self.failure or ExitCode.OK
            if self.stop_requested or self.failure is not None:
                self.stop_all()
            self.kill_overdue()
            time.sleep(POLL_S)


def _send(child: _Child, signum: signal.Signals) -> None:
    try:
        child.process.send_signal(signum)
    except ProcessLookupError:  # exited between poll() and now
        pass


def run_node(settings: WorkerSettings) -> int:
    """Run `settings.procs` worker processes until they stop; returns the exit code of the node.

    0 when every process stopped cleanly (SIGTERM/SIGINT, or each removed by an operator);
    otherwise the code of the first process that failed (see exit_codes.ExitCode), after the
    others were stopped.
    """
    try:
        ports = child_ports(settings.port, settings.procs)
    except ValueError as exc:
        print(f"populace worker: {exc}", file=sys.stderr, flush=True)
        return ExitCode.CONFIG
    supervisor = _Supervisor(settings)
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
        try:
            supervisor.spawn(ports)
        except OSError as exc:
            print(
                f"populace worker: cannot start a worker process ({exc})",
                file=sys.stderr,
                flush=True,
            )
            supervisor.failure = ExitCode.ERROR
        return supervisor.run()
    finally:
        # Whatever happened above (even KeyboardInterrupt in the supervisor), leave no child behind.
        if any(child.returncode is None for child in supervisor.children):
            supervisor.stop_all()
            deadline = time.monotonic() + CHILD_STOP_TIMEOUT_S
            for child in supervisor.children:
                try:
                    child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    _send(child, signal.SIGKILL)
                    child.process.wait()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
