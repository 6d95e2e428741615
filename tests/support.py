"""Helpers the tests share: free ports, waiting, and real manager/worker processes."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
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


async def wait_until(
    predicate: Callable[[], Any], timeout: float = 15.0, every: float = 0.005, what: str = ""
) -> Any:
    """wait_for inside an event loop: let the other tasks (and threads) run between polls, and
    fail with `what` after timeout. A guard against hanging, not a speed bound."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        await asyncio.sleep(every)


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


# Workers the tests start accept this secret (POPULACE_RPC_SECRET), so a test can also call them
# directly over gRPC to check what they host. Production workers each make their own.
WORKER_RPC_SECRET = "test-rpc-secret-" + os.urandom(8).hex()


def worker_metadata(secret: str = WORKER_RPC_SECRET) -> tuple[tuple[str, str], ...]:
    """gRPC call metadata that test workers accept."""
    return (("authorization", f"Bearer {secret}"),)


class WithWorkerSecret(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """A sync channel interceptor adding the test workers' secret to every call."""

    def _with_secret(self, continuation, details, request):
        metadata = [*(details.metadata or ()), *worker_metadata()]
        return continuation(details._replace(metadata=metadata), request)

    intercept_unary_unary = intercept_unary_stream = _with_secret
    intercept_stream_unary = intercept_stream_stream = _with_secret


def trust_test_workers(addresses: list[str]) -> None:
    """Let manager code run in the test process call these test workers (as registration
    does in the manager)."""
    from backend.workers.channels import WorkerCredentials, directory

    for address in addresses:
        directory.remember(address, WorkerCredentials(WORKER_RPC_SECRET))


def worker_client(address: str):
    """A WorkerClient of a test worker (the manager's directory is not in the test process)."""
    from backend.workers.grpc_client import WorkerClient, WorkerCredentials

    return WorkerClient(address, WorkerCredentials(WORKER_RPC_SECRET))


def install_plugin_package(root: Path, module: str, source: str, plugin: str, target: str) -> Path:
    """A directory that, on a process's PYTHONPATH, installs a simulation plugin the way a user's
    package is: `module`.py holding `source`, and a populace-`plugin` 0.1.0 distribution whose
    populace.simulations entry point `plugin` is `module`:`target`."""
    root.mkdir(parents=True)
    (root / f"{module}.py").write_text(source)
    info = root / f"populace_{plugin}-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: populace-{plugin}\nVersion: 0.1.0\n"
    )
    (info / "entry_points.txt").write_text(
        f"[populace.simulations]\n{plugin} = {module}:{target}\n"
    )
    return root


def populace_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "backend.cli", *args]


@dataclass
class Manager:
    """A real `populace manager` process on a free port."""

    tmp: Path
    database_url: str
    api_token: str = "test-api-token-" + os.urandom(6).hex()
    join_token: str = "test-join-token-" + os.urandom(6).hex()
    viewer_token: str = "test-viewer-token-" + os.urandom(6).hex()
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    # The address it listens on and is reached at (e.g. a bridge IP that network namespaces
    # reach: tests/netns.py).
    host: str = "127.0.0.1"

    @property
    def url(self) -> str:
        scheme = "https" if self.extra_env.get("POPULACE_TLS_CERT") else "http"
        return f"{scheme}://{self.host}:{self.port}"

    @property
    def verify(self) -> ssl.SSLContext | bool:
        """How clients check the manager's certificate (its CA when it serves TLS)."""
        ca = self.extra_env.get("POPULACE_TLS_CA")
        return ssl.create_default_context(cafile=ca) if ca else True

    @property
    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "POPULACE_DATABASE_URL": self.database_url,
            "POPULACE_API_TOKEN": self.api_token,
            "POPULACE_JOIN_TOKEN": self.join_token,
            "POPULACE_VIEWER_TOKEN": self.viewer_token,
            "POPULACE_DATA_DIR": str(self.tmp / "data"),
            **self.extra_env,
        }

    def start(self) -> Manager:
        log = open(self.tmp / f"manager-{self.port}.log", "ab")
        self.proc = subprocess.Popen(
            populace_cmd(
                "manager",
                "--port",
                str(self.port),
                *(["--host", self.host] if self.host != "127.0.0.1" else []),
            ),
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
        return httpx.get(f"{self.url}/healthz", timeout=1, verify=self.verify).status_code == 200

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None:
            stop_process(self.proc, sig)

    def log(self) -> str:
        return (self.tmp / f"manager-{self.port}.log").read_text(errors="replace")[-4000:]

    def api(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {self.api_token}"},
            timeout=10,
            verify=self.verify,
        )

    def events(self, open_timeout: float = 10, token: str | None = None, **params):
        """A websocket to /ws/events (query `params`), authenticated in its subprotocols."""
        from backend.events.socket_auth import connect_events

        return connect_events(self.url, token or self.api_token, open_timeout, **params)

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
        rpc_secret: str | None = WORKER_RPC_SECRET,
        **kwargs,
    ) -> subprocess.Popen:
        """A real `populace worker` node; `node` names it (its workers' identity is node/slot).
        rpc_secret=None: each process makes its own secret, as in production."""
        log = open(self.tmp / f"worker-{time.monotonic_ns()}.log", "ab")
        args = ["worker", "--manager", self.url, "--procs", str(procs)]
        env = {
            **self.env,
            "POPULACE_JOIN_TOKEN": join_token or self.join_token,
            **({"POPULACE_RPC_SECRET": rpc_secret} if rpc_secret else {}),
            **(env or {}),
        }
        if not rpc_secret:
            env.pop("POPULACE_RPC_SECRET", None)
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


class ManagerFactory:
    """Starts real managers with their files under `tmp`; stop() stops every one of them and
    every worker node started through them."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.started: list[Manager] = []
        self.children = []

    def __call__(self, database_url: str | None = None, **kwargs) -> Manager:
        url = database_url or f"sqlite+aiosqlite:///{self.tmp}/populace.db"
        manager = Manager(tmp=self.tmp, database_url=url, **kwargs)
        original = manager.start_workers

        def start_workers(*args, **kw):
            proc = original(*args, **kw)
            self.children.append(proc)
            return proc

        manager.start_workers = start_workers  # type: ignore[method-assign]
        self.started.append(manager)
        return manager

    def stop(self) -> None:
        for proc in self.children:
            stop_process(proc)
        for manager in self.started:
            manager.stop()


def empty_cluster(manager: Manager, workers: int, timeout: float = 60) -> None:
    """Bring a cluster that a module's tests share back to empty for the next test: no run
    going, every population deleted, and `workers` worker processes online hosting no agent
    (their own heartbeats say so, stale copies on a worker that was away included)."""
    with manager.api() as api:

        def active_runs() -> list[dict]:
            params = {"status": "pending,running,paused", "limit": 1000}
            resp = api.get("/api/simulations", params=params)
            resp.raise_for_status()
            return resp.json()["items"]

        # A run a failed test left going holds its population: cancel it first.
        for simulation in active_runs():
            api.post(f"/api/simulations/{simulation['id']}/cancel")
        wait_for(lambda: not active_runs(), timeout, what="no run going")

        def live_populations() -> list[dict]:
            resp = api.get("/api/populations", params={"limit": 1000})
            resp.raise_for_status()
            return resp.json()["items"]

        for population in live_populations():
            resp = api.delete(f"/api/populations/{population['id']}")
            assert resp.status_code == 202, resp.text
        wait_for(lambda: not live_populations(), timeout, what="every population deleted")
    wait_for(
        lambda: (
            len(online := manager.workers(state="online")) == workers
            and all(w["agents"] == 0 for w in online)
        ),
        timeout,
        what=f"{workers} empty workers online",
    )
    # The API answers from the heartbeats in memory; placement reads the store, which gets
    # them at the next flush: wait until it also has every worker empty.
    wait_for(
        lambda: [agents for *_, agents in _stored_placing_workers(manager)] == [0] * workers,
        timeout,
        what=f"the store's {workers} workers empty",
    )


def _stored_placing_workers(manager: Manager) -> list[tuple[int, int]]:
    """(worker id, agents) of the workers placement would use, as the manager's store has them."""
    from backend.db.session import make_engine, make_sessionmaker
    from backend.workers import registry

    async def read() -> list[tuple[int, int]]:
        engine = make_engine(manager.database_url)
        try:
            async with make_sessionmaker(engine)() as session:
                rows = await registry.placing_workers(session)
        finally:
            await engine.dispose()
        return [(row[0], row[3]) for row in rows]

    return asyncio.run(read())


@contextmanager
def running_cluster(tmp: Path, database_url: str, procs: int = 2) -> Iterator[Manager]:
    """A manager on database_url with one worker node of `procs` processes, all online; the
    node and the manager are stopped on exit."""
    manager = Manager(tmp=tmp, database_url=database_url).start()
    node = manager.start_workers(procs=procs)
    try:
        wait_for(
            lambda: len([w for w in manager.workers() if w["state"] == "online"]) == procs,
            30,
            what=f"{procs} workers online",
        )
        yield manager
    finally:
        stop_process(node)
        manager.stop()


def guess_game(ratio: float, offset: float) -> tuple[str, Any, Any]:
    """The built-in guessing game with this rule, as the round's outcome takes a plugin:
    (name, simulation, params)."""
    from populace.registry import installed

    simulation = installed().get("guess").simulation
    params = type(simulation).params.model_validate({"rule": {"ratio": ratio, "offset": offset}})
    return "guess", simulation, params


class Cli:
    """`populace ...` against one manager, through the environment a user would set."""

    def __init__(self, manager: Manager) -> None:
        self.manager = manager

    @property
    def env(self) -> dict:
        return {
            **os.environ,
            "POPULACE_MANAGER_URL": self.manager.url,
            "POPULACE_API_TOKEN": self.manager.api_token,
        }

    def __call__(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            populace_cmd(*args),
            env=self.env,
            capture_output=True,
            text=True,
            timeout=180,
            input=input,
        )

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(
            populace_cmd(*args),
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


def consecutive_free_ports(n: int) -> int:
    """A base port P such that P .. P+n-1 are free now."""
    for _ in range(100):
        base = free_port()
        sockets = []
        try:
            for port in range(base, base + n):
                sock = socket.socket()
                sockets.append(sock)
                sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
        return base
    raise AssertionError(f"no {n} consecutive free ports")
