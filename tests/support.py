"""Helpers the tests share: free ports, waiting, and real manager/worker processes."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
IN_CI = os.environ.get("CI") == "true"


def reset_postgres(url: str) -> None:
    """An empty public schema on the Postgres database at url (SQLAlchemy or plain form)."""

    async def reset() -> None:
        import asyncpg

        conn = await asyncpg.connect(url.replace("postgresql+asyncpg", "postgresql"), timeout=5)
        try:
            await conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public;")
        finally:
            await conn.close()

    asyncio.run(reset())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(
    predicate: Callable[[], Any], timeout: float = 15.0, every: float = 0.1, what: str = ""
) -> Any:
    """Poll until predicate returns something truthy; fail with `what` after timeout."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # the thing we wait for may not be up yet
            last_error = exc
        time.sleep(every)
    raise AssertionError(
        f"timed out after {timeout}s waiting for {what or predicate}: {last_error!r}"
    )


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def descendants(pid: int) -> list[int]:
    import psutil

    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def stop_process(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def populace_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "backend.cli", *args]


@dataclass
class Manager:
    """A real `populace manager` process on a free port."""

    tmp: Path
    database_url: str
    api_token: str = "test-api-token-" + os.urandom(6).hex()
    join_token: str = "test-join-token-" + os.urandom(6).hex()
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen | None = None
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "POPULACE_DATABASE_URL": self.database_url,
            "POPULACE_API_TOKEN": self.api_token,
            "POPULACE_JOIN_TOKEN": self.join_token,
            "POPULACE_DATA_DIR": str(self.tmp / "data"),
            **self.extra_env,
        }

    def start(self) -> Manager:
        log = open(self.tmp / f"manager-{self.port}.log", "ab")
        self.proc = subprocess.Popen(
            populace_cmd("manager", "--port", str(self.port)),
            cwd=self.tmp,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        wait_for(self._healthy, timeout=60, what=f"manager on {self.url}")
        return self

    def _healthy(self) -> bool:
        if self.proc.poll() is not None:
            raise AssertionError(f"manager exited with {self.proc.returncode}: {self.log()}")
        return httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None:
            stop_process(self.proc, sig)

    def log(self) -> str:
        return (self.tmp / f"manager-{self.port}.log").read_text(errors="replace")[-4000:]

    def api(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {self.api_token}"}, timeout=10
        )

    def workers(self, **params) -> list[dict]:
        with self.api() as client:
            resp = client.get("/api/workers", params=params)
            resp.raise_for_status()
            return resp.json()["items"]

    def start_workers(
        self,
        procs: int = 1,
        join_token: str | None = None,
        node: str | None = None,
        env: dict[str, str] | None = None,
        **kwargs,
    ) -> subprocess.Popen:
        """A real `populace worker` node; `node` names it (its workers' identity is node/slot)."""
        log = open(self.tmp / f"worker-{time.monotonic_ns()}.log", "ab")
        args = ["worker", "--manager", self.url, "--procs", str(procs)]
        env = {**self.env, "POPULACE_JOIN_TOKEN": join_token or self.join_token, **(env or {})}
        if node is not None:
            env["POPULACE_NODE"] = node
        proc = subprocess.Popen(
            populace_cmd(*args),
            cwd=self.tmp,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            **kwargs,
        )
        proc.log_path = log.name  # type: ignore[attr-defined]
        return proc
