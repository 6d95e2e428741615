"""A fleet of simulated workers heartbeating through the real worker plane.

Starts a real manager (SQLite in a temp folder, or a throwaway Postgres database) and N
simulated workers, spread over a few host processes (one asyncio loop each). Every simulated
worker is what the manager sees of a real one:

- its own gRPC server on its own port of 127.0.0.1, guarded by the real RpcSecretInterceptor
  with its own secret, answering GetInfo with its own node, the host's pid and its capacity
  (so the manager's verification at registration, and its reaper's calls, go through gRPC as
  for a real worker; other calls are UNIMPLEMENTED: no agents are ever placed);
- its own keep-alive HTTP connection to the manager: it registers with the join token
  (bounded concurrency: the manager verifies each one over gRPC), then heartbeats with
  realistic stats at the interval the manager gives it (in the registration, and in a
  heartbeat's answer when there is one), from a random phase. A 404 registers again; 409 and
  410 stop that worker.

After every worker registered and one interval of warm-up, it measures over a window: the
manager's CPU (its process and children, as a percent of one core), heartbeats answered per
second and their latency; then, with the fleet still beating, the dashboard's Cluster page in
Debian's Chromium (first paint of the workers table with rows, over fresh loads); and at the end
how many workers GET /api/workers lists as online. Prints one JSON line.

The host processes speak JSON lines with this process over their stdin and stdout.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import select
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psutil

from bench import processes

TARGET_CPU_PERCENT = 10
TARGET_FIRST_PAINT_MS = 1000
# Where a Cluster page load spends its time (printed to stderr per load).
TIMELINE_JS = """(() => ({
  dom_content_loaded: performance.getEntriesByType("navigation")[0].domContentLoadedEventEnd,
  requests: performance.getEntriesByType("resource")
    .filter((e) => e.name.includes("/api/"))
    .map((e) => [e.name.split("/api/")[1].slice(0, 30), Math.round(e.startTime), Math.round(e.responseEnd)]),
  commit: window.__bench.commit,
  paint: window.__bench.paint,
}))()"""
CAPACITY = 200_000
# What a real worker gives the manager before it counts it unavailable (manager_client.py).
HTTP_TIMEOUT_S = 5.0
REGISTER_ATTEMPTS = 30


# --------------------------------------------------------------------------------------------
# The host process: serves a share of the simulated workers.


class Http:
    """One keep-alive HTTP/1.1 connection to the manager, one request at a time, JSON only.

    Deliberately minimal (no pool, no TLS): a host drives hundreds of simulated workers and must
    leave the machine's CPU to the manager being measured.
    """

    def __init__(self, host: str, port: int, token: str) -> None:
        self.host, self.port = host, port
        self._head = (
            f"Host: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
            "Accept: application/json\r\nContent-Type: application/json\r\n"
        )
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None

    async def post(self, path: str, body: dict) -> tuple[int, dict]:
        data = json.dumps(body).encode()
        request = (
            f"POST {path} HTTP/1.1\r\n{self._head}Content-Length: {len(data)}\r\n\r\n".encode()
            + data
        )
        for _ in range(2):
            reused = self._writer is not None
            try:
                async with asyncio.timeout(HTTP_TIMEOUT_S):
                    if self._writer is None:
                        self._reader, self._writer = await asyncio.open_connection(
                            self.host, self.port
                        )
                    self._writer.write(request)
                    return await self._response()
            except (ConnectionError, asyncio.IncompleteReadError):
                self.close()
                # The server may have closed an idle keep-alive connection: one fresh try.
                if not reused:
                    raise
            except BaseException:
                self.close()  # a late answer must not be read as the next request's
                raise
        raise ConnectionError("unreachable")  # pragma: no cover - the loop returns or raises

    async def _response(self) -> tuple[int, dict]:
        assert self._reader is not None
        head = (await self._reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        status = int(head[0].split(" ", 2)[1])
        length, close = 0, False
        for line in head[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "connection" and value.strip().lower() == "close":
                close = True
            elif name == "transfer-encoding":
                raise ConnectionError(f"unexpected transfer-encoding {value.strip()}")
        raw = await self._reader.readexactly(length) if length else b""
        if close:
            self.close()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        return status, body if isinstance(body, dict) else {}


class Stats:
    def __init__(self) -> None:
        self.beats_sent = 0
        self.beats_ok = 0
        self.errors: Counter[str] = Counter()
        self.latencies_ms: list[float] = []
        # The heartbeat intervals and TTLs the manager gave (registrations and heartbeats).
        self.intervals: Counter[float] = Counter()
        self.ttls: Counter[float] = Counter()

    def as_json(self, latencies: bool) -> dict:
        out: dict[str, Any] = {
            "beats_sent": self.beats_sent,
            "beats_ok": self.beats_ok,
            "errors": dict(self.errors),
            "intervals": sorted(self.intervals),
            "interval": max(self.intervals, key=self.intervals.get, default=None),
            "ttl": max(self.ttls, key=self.ttls.get, default=None),
        }
        if latencies:
            out["latencies_ms"] = [round(x, 3) for x in self.latencies_ms]
        return out


def _beat(lease: str, rss: int) -> dict:
    """A heartbeat's body, as an idle worker sends it."""
    return {
        "lease": lease,
        "agents": 0,
        "capacity": CAPACITY,
        "cpu_percent": round(random.uniform(0.2, 4.0), 2),
        "rss_bytes": rss,
        "inflight_llm_calls": 0,
        # As a real worker says: it hosts no population (no agents are placed here).
        "populations": [],
    }


class Host:
    def __init__(self, config: dict) -> None:
        self.config = config
        host, _, port = config["manager"].rpartition("//")[2].partition(":")
        self.manager = (host, int(port))
        self.total = Stats()
        self.window = Stats()
        self.registered = 0
        self.register_failed = 0
        self.register_errors: Counter[str] = Counter()
        self.reregistered = 0
        self.stopped: Counter[str] = Counter()
        self.pid = os.getpid()

    def note(self, outcome: str, latency_ms: float | None = None) -> None:
        for stats in (self.total, self.window):
            stats.beats_sent += 1
            if latency_ms is not None:
                stats.beats_ok += 1
                stats.latencies_ms.append(latency_ms)
            else:
                stats.errors[outcome] += 1

    def told(self, answer: dict, interval: float) -> float:
        """The interval to beat at from now on: the answer's, when it gives one (and its TTL)."""
        told = answer.get("heartbeat_interval_s")
        if isinstance(told, (int, float)) and told > 0:
            interval = float(told)
        ttl = answer.get("ttl_s")
        for stats in (self.total, self.window):
            stats.intervals[interval] += 1
            if isinstance(ttl, (int, float)):
                stats.ttls[float(ttl)] += 1
        return interval

    async def serve(self, node: str, secret: str):
        import grpc

        from worker_server.rpc import worker_pb2, worker_pb2_grpc
        from worker_server.rpc_auth import RpcSecretInterceptor

        pid, version, started_at = self.pid, self.config["version"], time.time()

        class Servicer(worker_pb2_grpc.WorkerServiceServicer):
            async def GetInfo(self, request, context):  # noqa: N802 - the proto's name
                return worker_pb2.WorkerInfo(
                    node=node,
                    pid=pid,
                    capacity=CAPACITY,
                    cpu_percent=random.uniform(0.2, 4.0),
                    rss_bytes=random.randint(80, 160) << 20,
                    version=version,
                    started_at=started_at,
                )

        server = grpc.aio.server(
            interceptors=[RpcSecretInterceptor(secret)], options=[("grpc.so_reuseport", 0)]
        )
        worker_pb2_grpc.add_WorkerServiceServicer_to_server(Servicer(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        return server, f"127.0.0.1:{port}"

    async def worker(self, index: int, gate: asyncio.Semaphore, done: asyncio.Event) -> None:
        """One simulated worker, for as long as the host runs."""
        from worker_server.rpc_auth import new_secret

        node = f"fleet-{self.config['host']}-{index:05d}"
        secret = new_secret()
        server, address = await self.serve(node, secret)
        http = Http(*self.manager, self.config["join_token"])
        registration = {
            "node": node,
            "address": address,
            "pid": self.pid,
            "capacity": CAPACITY,
            "version": self.config["version"],
            "slot": 0,
            "rpc_secret": secret,
            "tls": False,
        }
        rss = random.randint(90, 140) << 20
        try:
            async with gate:
                answer = await self.register(http, registration)
            done.set()
            if answer is None:
                self.register_failed += 1
                return
            self.registered += 1
            worker_id, lease = answer["id"], answer["lease"]
            interval = self.told(answer, 1.0)
            loop = asyncio.get_running_loop()
            next_at = loop.time() + random.uniform(0, interval)
            while True:
                await asyncio.sleep(max(0.0, next_at - loop.time()))
                rss = max(64 << 20, rss + random.randint(-(1 << 20), 1 << 20))
                status, body = await self.heartbeat(http, worker_id, _beat(lease, rss))
                if status == 200:
                    interval = self.told(body, interval)
                next_at += interval
                now = loop.time()
                if next_at < now:  # late (a slow answer): keep the cadence from now on
                    next_at = now + interval
                if status == 404:
                    answer = await self.register(http, registration)
                    if answer is None:
                        self.stopped["register_failed"] += 1
                        return
                    self.reregistered += 1
                    worker_id, lease = answer["id"], answer["lease"]
                    interval = self.told(answer, interval)
                elif status in (409, 410):
                    self.stopped[str(status)] += 1
                    return
        finally:
            done.set()
            http.close()
            await server.stop(0)

    async def heartbeat(self, http: Http, worker_id: int, beat: dict) -> tuple[int | str, dict]:
        """POST one heartbeat and note its outcome (with its latency when answered 200)."""
        started = time.perf_counter()
        try:
            status, body = await http.post(f"/api/workers/{worker_id}/heartbeat", beat)
        except TimeoutError:
            status, body = "timeout", {}
        except (OSError, asyncio.IncompleteReadError, ValueError):
            status, body = "connection", {}
        if status == 200:
            self.note("ok", (time.perf_counter() - started) * 1000)
        else:
            self.note(str(status))
        return status, body

    async def register(self, http: Http, body: dict) -> dict | None:
        for _ in range(REGISTER_ATTEMPTS):
            try:
                status, answer = await http.post("/api/workers/register", body)
            except TimeoutError:
                status, answer = "timeout", {}
            except (OSError, asyncio.IncompleteReadError, ValueError):
                status, answer = "connection", {}
            if status == 201:
                return answer
            self.register_errors[str(status)] += 1
            if status not in (409, 503, "timeout", "connection") and not (
                isinstance(status, int) and status >= 500
            ):
                return None  # 401, 403, 422: retrying cannot help
            await asyncio.sleep(random.uniform(0.5, 2.0))
        return None

    def snapshot(self, reset: bool) -> dict:
        out = {
            "event": "snapshot",
            "pid": self.pid,
            "registered": self.registered,
            "register_failed": self.register_failed,
            "register_errors": dict(self.register_errors),
            "reregistered": self.reregistered,
            "stopped": dict(self.stopped),
            "window": self.window.as_json(latencies=True),
            "total": self.total.as_json(latencies=False),
        }
        if reset:
            self.window = Stats()
        return out

    async def run(self, commands: asyncio.StreamReader) -> None:
        gate = asyncio.Semaphore(self.config["register_concurrency"])
        dones = []
        tasks = []
        for index in self.config["indices"]:
            done = asyncio.Event()
            dones.append(done)
            tasks.append(asyncio.create_task(self.worker(index, gate, done)))
        await asyncio.gather(*(d.wait() for d in dones))
        _say({"event": "ready", **self.snapshot(reset=True)})
        try:
            while line := await commands.readline():  # EOF: the bench went away
                command = json.loads(line)
                if command.get("cmd") == "snapshot":
                    _say(self.snapshot(reset=bool(command.get("reset"))))
                elif command.get("cmd") == "stop":
                    break
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


def _say(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


async def _host() -> None:
    commands = asyncio.StreamReader()
    await asyncio.get_running_loop().connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(commands), sys.stdin
    )
    config = json.loads(await commands.readline())  # the first line; then commands
    await Host(config).run(commands)


def host_main() -> int:
    asyncio.run(_host())
    return 0


# --------------------------------------------------------------------------------------------
# The bench: manager, hosts, measurements.


class Hosts:
    """The host processes (each in its own process group), talked to in JSON lines."""

    def __init__(self, log) -> None:
        self._log = log
        self.procs: list[subprocess.Popen] = []

    def start(self, configs: list[dict], env: dict) -> None:
        root = Path(__file__).resolve().parent.parent
        for config in configs:
            proc = processes.spawn(
                [sys.executable, "-m", "bench.fleet"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._log,
                cwd=root,
                env=env,
            )
            self.procs.append(proc)
            self.send(proc, config)

    @staticmethod
    def send(proc: subprocess.Popen, message: dict) -> None:
        assert proc.stdin is not None
        proc.stdin.write((json.dumps(message) + "\n").encode())
        proc.stdin.flush()

    @staticmethod
    def read(proc: subprocess.Popen, timeout: float) -> dict:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        if not ready:
            raise RuntimeError(f"host process {proc.pid} did not answer within {timeout:.0f} s")
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"host process {proc.pid} exited ({proc.poll()})")
        return json.loads(line)

    def wait_ready(self, timeout: float) -> list[dict]:
        deadline = time.monotonic() + timeout
        return [self.read(p, max(0.1, deadline - time.monotonic())) for p in self.procs]

    def snapshot(self, reset: bool) -> list[dict]:
        for proc in self.procs:
            self.send(proc, {"cmd": "snapshot", "reset": reset})
        return [self.read(proc, 30) for proc in self.procs]

    def stop(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(OSError, ValueError):
                self.send(proc, {"cmd": "stop"})
                proc.stdin.close()
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


def _cpu_seconds(process: psutil.Process) -> float:
    """User + system CPU of a process, its reaped children and its live descendants."""
    total = 0.0
    for p in [process, *process.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess):
            t = p.cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
    return total


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return round(values[0], 2)
    return round(statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1], 2)


def _online(cluster) -> tuple[int, int]:
    """(online, listed) over every page of GET /api/workers."""
    online = listed = 0
    after = None
    while True:
        params = {"limit": 1000, **({"after": after} if after is not None else {})}
        page = cluster.api("/api/workers", **params)
        listed += len(page["items"])
        online += sum(1 for w in page["items"] if w["state"] == "online")
        after = page.get("next_after")
        if after is None:
            return online, listed


def _cluster_first_paints(url: str, token: str, loads: int) -> tuple[list[float], list[int]]:
    """Fresh loads of the Cluster page: navigation start to the paint after the first workers
    table rows are in the DOM (as bench/dashboard.py measures it), and the rows then shown."""
    from playwright.sync_api import sync_playwright

    from bench.dashboard import CHROMIUM, CHROMIUM_ARGS, _context

    if not CHROMIUM.is_file():
        raise RuntimeError(f"{CHROMIUM} is missing: apt-get install -y chromium")
    paints, rows = [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            # One context: the first load is cold (no HTTP or code cache), the others warm.
            context = _context(browser, token)
            for _ in range(loads):
                page = context.new_page()
                page.goto(f"{url}/cluster")
                page.wait_for_function("window.__bench.paint !== null", timeout=30_000)
                paints.append(page.evaluate("window.__bench.paint"))
                rows.append(page.evaluate("document.querySelectorAll('tr[data-worker-id]').length"))
                print(json.dumps(page.evaluate(TIMELINE_JS)), file=sys.stderr)
                page.close()
        finally:
            browser.close()
    return paints, rows


def _merge(snapshots: list[dict]) -> dict:
    errors: Counter[str] = Counter()
    total_errors: Counter[str] = Counter()
    register_errors: Counter[str] = Counter()
    stopped: Counter[str] = Counter()
    latencies: list[float] = []
    for s in snapshots:
        errors.update(s["window"]["errors"])
        total_errors.update(s["total"]["errors"])
        register_errors.update(s["register_errors"])
        stopped.update(s["stopped"])
        latencies.extend(s["window"]["latencies_ms"])
    # The interval most beats were told, per host; and the range of all those told.
    usual = [s["window"]["interval"] for s in snapshots if s["window"]["interval"]]
    told = [i for s in snapshots for i in s["window"]["intervals"]]
    ttls = [s["window"]["ttl"] for s in snapshots if s["window"]["ttl"]]
    return {
        "registered": sum(s["registered"] for s in snapshots),
        "register_failed": sum(s["register_failed"] for s in snapshots),
        "register_errors": dict(register_errors),
        "reregistered": sum(s["reregistered"] for s in snapshots),
        "stopped": dict(stopped),
        "beats_sent": sum(s["window"]["beats_sent"] for s in snapshots),
        "beats_ok": sum(s["window"]["beats_ok"] for s in snapshots),
        "errors": dict(errors),
        "errors_total": dict(total_errors),
        "latencies_ms": latencies,
        "heartbeat_interval_s": max(usual) if usual else None,
        "intervals_told": [min(told), max(told)] if told else None,
        "ttl_s": max(ttls) if ttls else None,
    }


@contextlib.contextmanager
def _database(database: str, admin_url: str):
    if database == "sqlite":
        yield {}  # LocalCluster's own: SQLite in its temp folder
        return
    if database != "postgresql":
        raise ValueError(f"database must be sqlite or postgresql, not {database!r}")
    from bench.deploy import scratch_database

    with scratch_database(admin_url) as url:
        yield {"POPULACE_DATABASE_URL": url}


def _host_configs(cluster, workers: int, hosts: int, register_concurrency: int) -> list[dict]:
    """Each host process's share of the workers (every hosts-th index) and how to join."""
    from worker_server.version import populace_version

    return [
        {
            "host": h,
            "indices": list(range(h, workers, hosts)),
            "manager": cluster.url,
            "join_token": cluster.env["POPULACE_JOIN_TOKEN"],
            "version": populace_version(),
            "register_concurrency": max(1, register_concurrency // hosts),
        }
        for h in range(hosts)
    ]


def _register(
    fleet: Hosts, cluster, workers: int, hosts: int, register_concurrency: int
) -> tuple[dict, float]:
    """Start the host processes and wait until every worker registered: (their counts, the
    seconds it took)."""
    started = time.perf_counter()
    fleet.start(
        _host_configs(cluster, workers, hosts, register_concurrency),
        {**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    ready = _merge(fleet.wait_ready(timeout=max(120.0, workers * 0.3)))
    register_s = time.perf_counter() - started
    if ready["registered"] < workers:
        raise RuntimeError(
            f"only {ready['registered']} of {workers} workers registered: "
            f"{ready['register_errors']} (see {cluster.dir}/processes.log)"
        )
    return ready, register_s


def _window(cluster, fleet: Hosts, seconds: float) -> tuple[dict, float, float, float]:
    """The fleet's counts over a window of `seconds`: (counts, the window's wall seconds, the
    manager's CPU seconds and the hosts' CPU seconds in it)."""
    manager = psutil.Process(cluster.manager.pid)
    host_procs = [psutil.Process(p.pid) for p in fleet.procs]
    fleet.snapshot(reset=True)
    cpu0, wall0 = _cpu_seconds(manager), time.perf_counter()
    hosts_cpu0 = sum(_cpu_seconds(p) for p in host_procs)
    time.sleep(seconds)
    cpu1, wall1 = _cpu_seconds(manager), time.perf_counter()
    hosts_cpu1 = sum(_cpu_seconds(p) for p in host_procs)
    window = _merge(fleet.snapshot(reset=True))
    return window, wall1 - wall0, cpu1 - cpu0, hosts_cpu1 - hosts_cpu0


def _beat_rates(window: dict, window_s: float) -> dict:
    """Heartbeats sent and answered per second in the window, and their answers' latency."""
    latencies = window["latencies_ms"]
    return {
        "beats_sent_per_s": round(window["beats_sent"] / window_s, 1),
        "beats_per_s": round(window["beats_ok"] / window_s, 1),
        "beat_p50_ms": _percentile(latencies, 50),
        "beat_p95_ms": _percentile(latencies, 95),
        "beat_max_ms": round(max(latencies), 2) if latencies else None,
    }


def _first_paints(paints: list[float], rows: list[int]) -> dict:
    """The cluster page's first paints (ms) and the rows shown then, against the target."""
    return {
        "cluster_first_paint_ms_cold": round(paints[0], 1) if paints else None,
        "cluster_first_paint_ms_p50": round(statistics.median(paints), 1) if paints else None,
        "cluster_first_paint_ms_max": round(max(paints), 1) if paints else None,
        "cluster_rows_at_paint": min(rows) if rows else None,
        "target_first_paint_ms": TARGET_FIRST_PAINT_MS,
    }


def run(
    workers: int = 1000,
    seconds: float = 30.0,
    database: str = "sqlite",
    hosts: int = 4,
    loads: int = 5,
    dashboard: bool = True,
    admin_url: str = "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres",
    register_concurrency: int = 32,
) -> dict:
    from bench.cluster import LocalCluster

    hosts = max(1, min(hosts, workers))
    with _database(database, admin_url) as env, LocalCluster(**env) as cluster:
        log = open(cluster.dir / "hosts.log", "ab")  # noqa: SIM115 - closed below
        fleet = Hosts(log)
        try:
            ready, register_s = _register(fleet, cluster, workers, hosts, register_concurrency)
            # One full interval of warm-up (every worker beats at least once), then the window.
            # (the longest interval told yet: by then every worker beats at the current one).
            time.sleep(max(1.0, *(ready["intervals_told"] or [1.0])))
            window, window_s, manager_cpu_s, hosts_cpu_s = _window(cluster, fleet, seconds)
            paints: list[float] = []
            rows: list[int] = []
            if dashboard:
                paints, rows = _cluster_first_paints(cluster.url, cluster.api_token, loads)
            online, listed = _online(cluster)
            end = _merge(fleet.snapshot(reset=True))
        finally:
            fleet.stop()
            log.close()
    return {
        "benchmark": "fleet",
        "database": database,
        "workers": workers,
        "hosts": hosts,
        "heartbeat_interval_s": window["heartbeat_interval_s"],
        # The range told during the window (min, max): the manager may adapt it to the fleet.
        "heartbeat_intervals_told": window["intervals_told"],
        "ttl_s": window["ttl_s"],
        "register_s": round(register_s, 2),
        "window_s": round(window_s, 2),
        "manager_cpu_percent": round(100 * manager_cpu_s / window_s, 2),
        "target_cpu_percent": TARGET_CPU_PERCENT,
        # The simulated fleet's own CPU (all hosts), on the same machine: for context.
        "hosts_cpu_percent": round(100 * hosts_cpu_s / window_s, 2),
        "cpu_count": os.cpu_count(),
        **_beat_rates(window, window_s),
        "errors": window["errors"],
        "errors_total": end["errors_total"],
        "register_errors": end["register_errors"],
        "reregistered": end["reregistered"],
        "stopped": end["stopped"],
        "online_at_end": online,
        "listed_at_end": listed,
        **_first_paints(paints, rows),
    }


if __name__ == "__main__":
    sys.exit(host_main())
