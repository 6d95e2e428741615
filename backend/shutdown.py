"""A manager's shutdown, bounded.

On the first SIGTERM or SIGINT (or a lost lease) the manager stops acting at once: the write
fence closes and the loops and runs that write worker and run state are cancelled (the app's
`on_stop` hooks), then uvicorn drains its connections and the lifespan waits for those tasks.
All of it within `timeout_s` (POPULACE_SHUTDOWN_TIMEOUT_S): a watchdog thread, started with
the signal, ends the process with HUNG_EXIT_CODE and a log line naming what hung (the phase,
the asyncio tasks still running and where they wait, and where the event loop's thread is) if
it is still alive then. A thread, so it fires even when the event loop is blocked.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import FrameType

log = logging.getLogger(__name__)

# Exit statuses: a shutdown that did not finish in time; a manager that lost its lease.
HUNG_EXIT_CODE = 70
LEASE_LOST_EXIT_CODE = 69
_REPO = str(Path(__file__).resolve().parent.parent)


class Shutdown:
    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.reason: str | None = None
        self.deadline: float | None = None
        # What the manager is doing now, for the report (starting, serving, stopping ...).
        self.phase = "starting"
        # Not None: the process exits with this status once stopped (e.g. a lost lease).
        self.exit_code: int | None = None
        # Run in the event loop when stopping begins: stop acting (fence, loops, runs).
        self.on_stop: list[Callable[[], None]] = []
        # Set by the process that serves the app (the CLI): stop serving, and exit now.
        self.stop_serving: Callable[[], None] | None = None
        self.exit_process: Callable[[int], None] | None = None
        self.stopping = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watchdog: threading.Thread | None = None
        self._lock = threading.Lock()

    # -- starting to stop --------------------------------------------------------------------

    def signalled(self, reason: str) -> None:
        """From a signal handler (in the loop's thread, between any two bytecodes): start the
        clock now, and stopping in the loop as soon as it runs."""
        loop = _running_loop()
        self._start_clock(reason, loop)
        if loop is not None:
            loop.call_soon_threadsafe(self.begin, reason)

    def begin(self, reason: str, exit_code: int | None = None) -> None:
        """In the event loop: stop acting now. Idempotent; the first reason counts."""
        if exit_code is not None and self.exit_code is None:
            self.exit_code = exit_code
        self._start_clock(reason, _running_loop())
        if self.stopping.is_set():
            return
        self.stopping.set()
        log.info("manager stopping (%s): it writes nothing more", reason)
        for hook in self.on_stop:
            try:
                hook()
            except Exception:
                log.exception("a shutdown hook failed")
        if self.stop_serving is not None:
            self.stop_serving()

    def _start_clock(self, reason: str, loop: asyncio.AbstractEventLoop | None) -> None:
        with self._lock:
            if self._loop is None:
                self._loop = loop
            if self.deadline is not None:
                return
            self.reason = reason
            self.deadline = time.monotonic() + self.timeout_s
            if self.exit_process is not None:  # only a served process is ended from a thread
                self._watchdog = threading.Thread(
                    target=self._watch, name="shutdown-watchdog", daemon=True
                )
                self._watchdog.start()

    def remaining(self, margin: float = 0.0) -> float:
        """Seconds left of the bound (the whole bound when the clock has not started)."""
        if self.deadline is None:
            return self.timeout_s
        return max(0.0, self.deadline - time.monotonic() - margin)

    # -- when it does not finish -------------------------------------------------------------

    def _watch(self) -> None:
        assert self.deadline is not None
        time.sleep(max(0.0, self.deadline - time.monotonic()))
        self.hung(self.report())

    def hung(self, what: str) -> None:
        """Log what hung and end the process (when served); in-process (tests), just log."""
        log.critical(
            "shutdown (%s) did not finish within %g s: %s; exiting with status %d",
            self.reason,
            self.timeout_s,
            what,
            HUNG_EXIT_CODE,
        )
        if self.exit_process is not None:
            self.exit_process(HUNG_EXIT_CODE)

    def report(self) -> str:
        """The phase, the tasks still running (where each waits) and the loop thread's place."""
        parts = [f"phase: {self.phase}"]
        tasks = _pending_tasks(self._loop)
        if tasks:
            parts.append("still running: " + "; ".join(describe_task(t) for t in tasks))
        frame = sys._current_frames().get(threading.main_thread().ident or -1)
        if frame is not None:
            parts.append(f"event loop thread at {_where(frame)}")
        return ", ".join(parts)


def describe_task(task: asyncio.Task) -> str:
    """`name (coroutine, waiting in file:line in function)`, the innermost frame of our code."""
    coro = task.get_coro()
    name = task.get_name()
    qualname = getattr(coro, "__qualname__", type(coro).__name__)
    frames = _await_chain(coro)
    ours = [f for f in frames if _ours(f.f_code.co_filename)] or frames
    where = f", waiting in {_frame_text(ours[-1])}" if ours else ""
    return f"{name} ({qualname}{where})"


def _await_chain(coro) -> list[FrameType]:
    frames: list[FrameType] = []
    seen = 0
    while coro is not None and seen < 100:
        seen += 1
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            frames.append(frame)
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return frames


def _ours(path: str) -> bool:
    """The project's own code (not the libraries installed beside it)."""
    return path.startswith(_REPO) and "site-packages" not in path


def _frame_text(frame: FrameType) -> str:
    path = frame.f_code.co_filename
    if path.startswith(_REPO):
        path = os.path.relpath(path, _REPO)
    return f"{path}:{frame.f_lineno} in {frame.f_code.co_name}"


def _where(frame: FrameType) -> str:
    stack = traceback.extract_stack(frame)
    ours = [s for s in stack if _ours(s.filename)]
    entry = (ours or stack)[-1]
    path = (
        os.path.relpath(entry.filename, _REPO)
        if entry.filename.startswith(_REPO)
        else entry.filename
    )
    return f"{path}:{entry.lineno} in {entry.name}"


def _pending_tasks(loop: asyncio.AbstractEventLoop | None) -> list[asyncio.Task]:
    if loop is None:
        return []
    for _ in range(10):  # the set may change under us (we run beside the loop's thread)
        try:
            return sorted(
                (t for t in asyncio.all_tasks(loop) if not t.done()), key=lambda t: t.get_name()
            )
        except RuntimeError:
            continue
    return []


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def flush_logs() -> None:
    """Every handler of every logger, before os._exit skips the interpreter's own flushing."""
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    for logger in loggers:
        for handler in getattr(logger, "handlers", ()):
            try:
                handler.flush()
            except Exception:
                pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


def exit_now(code: int) -> None:
    flush_logs()
    os._exit(code)
