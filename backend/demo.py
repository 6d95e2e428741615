"""`populace demo`: a manager on SQLite and local workers as child processes.

Ctrl-C (or SIGTERM) stops the workers first, so they deregister, then the manager. Children are
also tied to this process's life with PR_SET_PDEATHSIG, so even a SIGKILL leaves nothing behind.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time

import httpx

from backend.settings import ManagerSettings
from backend.tokens import ensure_tokens

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass  # not Linux: the children's own parent watch still applies


def _spawn(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "backend.cli", *args], env=env, preexec_fn=_die_with_parent
    )


def _wait_healthy(url: str, manager: subprocess.Popen, timeout_s: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if manager.poll() is not None:
            return False
        try:
            if httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    return False


def _stop(proc: subprocess.Popen, timeout_s: float = 10.0) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_demo(port: int, procs: int) -> int:
    settings = ensure_tokens(ManagerSettings())
    api_token = settings.api_token.get_secret_value()
    env = {
        **os.environ,
        "POPULACE_API_TOKEN": api_token,
        "POPULACE_JOIN_TOKEN": settings.join_token.get_secret_value(),
        "POPULACE_DATA_DIR": str(settings.data_dir),
    }
    url = f"http://127.0.0.1:{port}"
    stopping = False

    def _on_signal(signum, _frame):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)

    manager = _spawn(["manager", "--host", "127.0.0.1", "--port", str(port)], env)
    workers = None
    try:
        if not _wait_healthy(url, manager):
            print(f"populace demo: the manager did not come up on {url}", file=sys.stderr)
            return 1
        workers = _spawn(["worker", "--manager", url, "--procs", str(procs)], env)
        print(
            f"\n  populace demo is running ({procs} worker processes, database {settings.database_url})\n"
            f"  Dashboard: {url}/#token={api_token}\n"
            f"  or open {url}/ and sign in with the API token: {api_token}\n"
            f"  Press Ctrl-C to stop everything.\n",
            flush=True,
        )
        while not stopping:
            if manager.poll() is not None or workers.poll() is not None:
                print("populace demo: a child process exited; stopping", file=sys.stderr)
                return 1
            time.sleep(0.2)
        return 0
    finally:
        if workers is not None:
            _stop(workers)
        _stop(manager)
        print("populace demo stopped; no processes left behind.")
