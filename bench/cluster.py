"""A throwaway local cluster for benchmarks: a real manager (SQLite in a temp folder) and real
worker nodes as child processes, all stopped on exit (each in a process group of its own,
bench.processes: a signal that ends the benchmark ends them too)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from bench import processes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if value := predicate():
                return value
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"timed out waiting for {what}")


def populace(*args: str) -> list[str]:
    return [sys.executable, "-m", "backend.cli", *args]


class LocalCluster:
    def __init__(self, **worker_env: str) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="populace-bench-")
        self.dir = Path(self._tmp.name)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.api_token = os.urandom(16).hex()
        # The workers' RPC secret, known here so a bench can also call workers directly.
        self.rpc_secret = os.urandom(16).hex()
        self.env = {
            **os.environ,
            "POPULACE_DATABASE_URL": f"sqlite+aiosqlite:///{self.dir}/bench.db",
            "POPULACE_API_TOKEN": self.api_token,
            "POPULACE_JOIN_TOKEN": os.urandom(16).hex(),
            "POPULACE_DATA_DIR": str(self.dir / "data"),
            "POPULACE_RPC_SECRET": self.rpc_secret,
            **worker_env,
        }
        self.headers = {"Authorization": f"Bearer {self.api_token}"}
        self._log = open(self.dir / "processes.log", "ab")
        self.manager: subprocess.Popen | None = None
        self.nodes: list[subprocess.Popen] = []

    def __enter__(self) -> LocalCluster:
        self.manager = self._spawn("manager", "--port", str(self.port))
        wait_until(lambda: httpx.get(f"{self.url}/healthz").status_code == 200, 60, "manager")
        return self

    def _spawn(self, *args: str, **kwargs) -> subprocess.Popen:
        return processes.spawn(
            populace(*args),
            env=self.env,
            cwd=self.dir,
            stdout=self._log,
            stderr=self._log,
            **kwargs,
        )

    def start_node(self, procs: int = 1, node: str | None = None) -> subprocess.Popen:
        """A worker node in its own process group; `node` names it (its workers' identity)."""
        env = {**self.env, "POPULACE_NODE": node} if node else self.env
        process = processes.spawn(
            populace("worker", "--manager", self.url, "--procs", str(procs)),
            env=env,
            cwd=self.dir,
            stdout=self._log,
            stderr=self._log,
        )
        self.nodes.append(process)
        return process

    def restart_manager(self, sig: int = signal.SIGKILL) -> float:
        """Stop the manager with sig and start it again on the same port and database; returns
        the monotonic time of the new process's spawn."""
        assert self.manager is not None
        self.manager.send_signal(sig)
        self.manager.wait(30)
        spawned = time.monotonic()
        self.manager = self._spawn("manager", "--port", str(self.port))
        wait_until(lambda: httpx.get(f"{self.url}/healthz").status_code == 200, 60, "manager")
        return spawned

    def api(self, path: str, **params) -> dict:
        resp = httpx.get(f"{self.url}{path}", headers=self.headers, params=params, timeout=30)
        resp.raise_for_status()
        return resp.json()

    def wait_online(self, n: int, timeout: float = 60) -> list[dict]:
        def online():
            ready = [w for w in self.api("/api/workers")["items"] if w["state"] == "online"]
            return ready if len(ready) == n else None

        return wait_until(online, timeout, f"{n} workers online")

    def __exit__(self, *exc) -> None:
        for node in self.nodes:
            if node.poll() is None:
                node.send_signal(signal.SIGTERM)
        for node in self.nodes:
            try:
                node.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(node.pid, signal.SIGKILL)
                node.wait()
        if self.manager is not None:
            self.manager.terminate()
            self.manager.wait(15)
        self._log.close()
        self._tmp.cleanup()
