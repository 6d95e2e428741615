"""The processes a benchmark starts, and ending them however the benchmark ends.

Every child a bench starts (a manager, worker nodes, fake or llama.cpp LLM servers, fleet hosts)
leads a process group of its own, recorded here, so ending a group ends what the child started
too (a node's worker processes). `end_on_signals()` makes SIGTERM and SIGINT raise `Interrupted`
(a SystemExit) in the main thread: the benchmark's context managers then stop what they started
in order, as on any error (workers deregister, the scratch database is dropped). Whatever group
still has a live process when the interpreter exits is ended then: SIGTERM, and SIGKILL after a
grace. A second signal, or an orderly path still running ORDERLY_EXIT_S after the first, does
not wait any longer: every group is ended and the process exits.

Before this (issue 26, item 6), `timeout` or a plain `kill` of `populace bench ...` left its
manager, worker nodes and fake servers running with no parent.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import threading
import time
from typing import Any

# What a group gets between SIGTERM and SIGKILL when it is ended at exit: a node's worker
# processes deregister (<= 1 s) and stop their servers (<= 2 s).
END_GRACE_S = 10.0
# How long the orderly path (the benchmark's own cleanup) may take after a signal.
ORDERLY_EXIT_S = 60.0
_POLL_S = 0.05

_lock = threading.RLock()  # re-entered by a second signal during end_all
_groups: dict[int, subprocess.Popen | None] = {}  # process group id -> its leader (if ours)
_installed = False


class Interrupted(SystemExit):
    """The benchmark was stopped by SIGTERM or SIGINT (exit code 128 + the signal)."""


def spawn(args: list[str], **kwargs: Any) -> subprocess.Popen:
    """subprocess.Popen in a process group of its own, ended when the benchmark ends."""
    kwargs["start_new_session"] = True
    process = subprocess.Popen(args, **kwargs)
    track(process)
    return process


def track(process: subprocess.Popen) -> None:
    """Record a child that leads its own process group (start_new_session)."""
    with _lock:
        _groups[process.pid] = process


def end_all(grace_s: float = END_GRACE_S) -> list[int]:
    """End every recorded group that still has a live process: SIGTERM, then SIGKILL after
    grace_s. Returns the groups that were still alive."""
    with _lock:
        groups = dict(_groups)
    alive = [pgid for pgid, leader in groups.items() if _group_alive(pgid, leader)]
    for pgid in alive:
        _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while any(_group_alive(p, groups[p]) for p in alive) and time.monotonic() < deadline:
        time.sleep(_POLL_S)
    for pgid in alive:
        if _group_alive(pgid, groups[pgid]):
            _signal_group(pgid, signal.SIGKILL)
    for pgid in alive:
        leader = groups[pgid]
        if leader is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                leader.wait(5)
    return alive


def end_on_signals() -> None:
    """SIGTERM/SIGINT stop the benchmark through its cleanup; at exit, no group is left behind.
    Call from the main thread, before anything is started."""
    global _installed
    if _installed:
        return
    _installed = True
    stopping = False

    def on_signal(signum: int, _frame: object) -> None:
        nonlocal stopping
        if stopping:  # asked twice: do not wait for the orderly path
            force_exit(128 + signum, grace_s=0.0)
        stopping = True
        # The exception can land inside a library that swallows it (an event loop's transport
        # callback does): past ORDERLY_EXIT_S the groups are ended and the process exits anyway.
        watchdog = threading.Timer(ORDERLY_EXIT_S, force_exit, (128 + signum,))
        watchdog.daemon = True
        watchdog.start()
        raise Interrupted(128 + signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_signal)
    atexit.register(end_all)


def force_exit(code: int, grace_s: float = END_GRACE_S) -> None:
    """End every group now and exit without the orderly path (a scratch database may stay)."""
    end_all(grace_s)
    os._exit(code)


def _group_alive(pgid: int, leader: subprocess.Popen | None) -> bool:
    if leader is not None:
        leader.poll()  # reap the leader: a zombie would keep its group "alive"
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # the group id was reused by someone else's processes
        return False
    return True


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)
