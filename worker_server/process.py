"""One worker process: a gRPC server that registers with the manager and heartbeats.

Started by the node supervisor (node.py) as `python -m worker_server.process --parent-pid P
--index I`, with its settings in POPULACE_* environment variables (so the join token never shows
in `ps`). I is the process's slot on the node: it registers with it, so the manager knows a
process the supervisor restarted in the same slot as the same worker. The registration decisions
live in lifecycle.py; the plane's thread (plane.py) performs them, off this process's event loop,
so a round that keeps the loop busy never silences the heartbeats; the loop ticks a progress
counter the heartbeats report beside them.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import time
from wsgiref.simple_server import WSGIServer

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection
from pydantic import ValidationError

from worker_server import logs as worker_logs
from worker_server.agents import AgentStore
from worker_server.exit_codes import ExitCode
from worker_server.lifecycle import RegistrationLifecycle, StopReason
from worker_server.llm.access import LlmAccess
from worker_server.llm.client import LlmClient
from worker_server.logbuffer import LogRing
from worker_server.manager_client import HeartbeatReport, ManagerClient
from worker_server.metrics import ProcessLoad, WorkerMetrics
from worker_server.metrics import serve as serve_metrics
from worker_server.plane import PlaneIdentity, PlaneThread
from worker_server.rounds import AgentSlots, SubEnvironment
from worker_server.rounds.network import PEER_METHODS, NetworkStates, peer_credential
from worker_server.rpc import worker_pb2, worker_pb2_grpc
from worker_server.rpc_auth import RpcSecretInterceptor, new_secret
from worker_server.servicer import ProcessIdentity, WorkerServicer
from worker_server.settings import WorkerSettings, format_address, warn_if_exposed_without_tls
from worker_server.stats import (
    LoadCounters,
    LoopProgress,
    ProcessSampler,
    available_memory_bytes,
    estimate_capacity,
)
from worker_server.version import populace_version

log = logging.getLogger("populace.worker")

WORKER_SERVICE = worker_pb2.DESCRIPTOR.services_by_name["WorkerService"].full_name
# How often the event loop marks its progress (heartbeats report how long ago it last did).
LOOP_TICK_S = 0.25
# The plane's thread deregisters (<= 1 s) once asked to stop; past this we stop without it.
PLANE_STOP_TIMEOUT_S = 5.0
# In-flight RPCs get this long to finish once we stop.
STOP_GRACE_S = 2.0
# Agent batches of 10^5 with personas run to tens of MiB; gRPC's default cap is 4 MiB.
MAX_MESSAGE_BYTES = 256 * 1024 * 1024


class WorkerProcess:
    def __init__(
        self,
        settings: WorkerSettings,
        *,
        slot: int = 0,
        parent_pid: int | None = None,
        client: ManagerClient | None = None,
    ) -> None:
        if slot < 0:
            raise ValueError(f"slot must be >= 0, got {slot}")
        self.settings = settings
        # Where this process sits on its node (the supervisor's --index): with the node, it names
        # the worker across restarts of the process.
        self.slot = slot
        self.parent_pid = parent_pid
        # Driven by the plane's thread (worker_server.plane), its only writer; read here.
        self.lifecycle = RegistrationLifecycle()
        self.load = LoadCounters()
        self.progress = LoopProgress()
        # The ids of the populations this process hosts agents of (told in every heartbeat, so
        # the manager's reaper needs no call to find strays), as the loop last copied them.
        self._populations: list[str] = []
        self.sampler = ProcessSampler()
        # The last log lines, served over RecentLogs (attached to the root logger while running).
        self.recent_logs = LogRing()
        self.address = ""
        self._client = client
        self._plane: PlaneThread | None = None
        self._early_stop: StopReason | None = None

    def request_stop(self, reason: StopReason) -> None:
        """Stop (from the loop's thread): the plane deregisters, then run() returns."""
        if self._plane is None:
            self._early_stop = self._early_stop or reason
        else:
            self._plane.stop(reason)

    async def run(self) -> int:
        settings = self.settings
        # Only a caller presenting this secret (the manager we register with) is served.
        secret = settings.rpc_secret.get_secret_value() if settings.rpc_secret else new_secret()
        server = _grpc_server(secret)
        bind_address = format_address(settings.host, settings.port)
        port, reason = _bind(server, bind_address, settings)
        if port == 0:
            _fail(f"cannot listen for gRPC on {bind_address} ({reason})")
            return ExitCode.BIND_FAILED
        assert settings.advertise_host is not None  # resolved by WorkerSettings
        self.address = format_address(settings.advertise_host, port)
        logging.getLogger().addHandler(self.recent_logs)

        capacity = _capacity(settings)
        identity = ProcessIdentity(
            node=settings.node,
            address=self.address,
            capacity=capacity,
            version=populace_version(),
            started_at=time.time(),
        )
        store, metrics, health = self._add_services(server, identity)
        metrics_server = None
        if settings.metrics_port:
            metrics_host = settings.metrics_host or settings.host
            try:
                metrics_server = _serve_metrics(metrics, metrics_host, settings)
            except OSError as exc:
                _fail(
                    "cannot serve metrics on "
                    f"{format_address(metrics_host, settings.metrics_port)} ({exc.strerror or exc})"
                )
                await server.stop(None)
                return ExitCode.BIND_FAILED
        await self._start_serving(server, health, port)

        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.request_stop, StopReason.SIGNAL)
        plane = self._plane = self._plane_thread(identity, secret)
        if self._early_stop is not None:
            plane.stop(self._early_stop)
        ticker = asyncio.create_task(self._keep_ticking(store))
        try:
            # The plane runs the registration lifecycle; its exit code is the process's.
            return await asyncio.wrap_future(plane.start())
        finally:
            ticker.cancel()
            await self._stop_serving(plane, server, health, metrics_server)

    async def _start_serving(
        self, server: grpc.aio.Server, health: HealthServicer, port: int
    ) -> None:
        """Serve, then tell health checkers and the log."""
        settings = self.settings
        await server.start()
        warn_if_exposed_without_tls(settings)
        for service in ("", WORKER_SERVICE):
            await health.set(service, health_pb2.HealthCheckResponse.SERVING)
        log.info(
            "serving gRPC%s on %s (bound %s); registering with %s",
            " over TLS" if settings.tls_cert else "",
            self.address,
            format_address(settings.host, port),
            settings.manager_base_url,
        )

    async def _stop_serving(
        self,
        plane: PlaneThread,
        server: grpc.aio.Server,
        health: HealthServicer,
        metrics_server: WSGIServer | None,
    ) -> None:
        """Deregister (unless the plane already has), then stop serving, health first."""
        if not plane.exit_code.done():  # run() itself was cancelled
            plane.stop(StopReason.SIGNAL)
            await asyncio.to_thread(plane.join, PLANE_STOP_TIMEOUT_S)
        # NOT_SERVING first, so health-checking peers stop routing to us before we vanish.
        await health.enter_graceful_shutdown()
        await server.stop(STOP_GRACE_S)
        if metrics_server is not None:
            metrics_server.shutdown()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
        logging.getLogger().removeHandler(self.recent_logs)

    def _add_services(
        self, server: grpc.aio.Server, identity: ProcessIdentity
    ) -> tuple[AgentStore, WorkerMetrics, HealthServicer]:
        """The worker's agents and rounds, served on `server` beside health (and reflection)."""
        settings = self.settings
        capacity = identity.capacity
        store = AgentStore(
            capacity,
            memory_size=settings.agent_memory_size,
            on_total_change=self.load.set_agents,
        )
        subenv = SubEnvironment(store, AgentSlots(settings.max_concurrency))
        metrics = WorkerMetrics(
            ProcessLoad(
                agents=lambda: self.load.agents,
                capacity=lambda: capacity,
                inflight_llm_calls=lambda: self.load.inflight_llm_calls,
                rounds_running=lambda: subenv.rounds_running,
            )
        )
        subenv.on_finished = metrics.round_finished
        servicer = WorkerServicer(
            identity,
            self.sampler,
            self.load,
            lambda: self.lifecycle.worker_id,
            store,
            subenv,
            llm=LlmClient(self.load, access=LlmAccess.from_settings(settings)),
            logs=self.recent_logs,
            network=NetworkStates(
                ca_pem=settings.tls_ca.read_bytes() if settings.tls_ca is not None else None
            ),
        )
        worker_pb2_grpc.add_WorkerServiceServicer_to_server(servicer, server)
        health = HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health, server)
        if settings.grpc_reflection:
            reflection.enable_server_reflection(
                (
                    WORKER_SERVICE,
                    health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
                    reflection.SERVICE_NAME,
                ),
                server,
            )
        return store, metrics, health

    def _plane_thread(self, identity: ProcessIdentity, secret: str) -> PlaneThread:
        """The thread that registers this process and heartbeats (not started yet)."""
        settings = self.settings
        capacity = identity.capacity
        return PlaneThread(
            self.lifecycle,
            PlaneIdentity(
                node=identity.node,
                address=identity.address,
                capacity=identity.capacity,
                version=identity.version,
                slot=self.slot,
                rpc_secret=secret,
                tls=settings.tls_cert is not None,
                labels=settings.labels,
            ),
            settings.manager_base_url,
            self._manager_client,
            lambda: self._report(capacity),
            self.progress,
            lambda: self.parent_pid,
        )

    def _manager_client(self) -> ManagerClient:
        """Made on the plane's thread: its HTTP connections belong to that thread's loop."""
        if self._client is not None:
            return self._client
        settings = self.settings
        return ManagerClient(
            settings.manager_base_url,
            settings.join_token.get_secret_value(),
            ca_file=settings.tls_ca,
        )

    async def _keep_ticking(self, store: AgentStore) -> None:
        """Advance the loop's progress, and publish what the plane's thread reads from here."""
        while True:
            self.progress.tick()
            # Copied on the loop: the agent store's dicts are only ever touched here.
            self._populations = sorted(store.population_counts())
            await asyncio.sleep(LOOP_TICK_S)

    def _report(self, capacity: int) -> HeartbeatReport:
        """A heartbeat's stats, built on the plane's thread from plain values."""
        stats = self.sampler.sample()
        return HeartbeatReport(
            agents=self.load.agents,
            capacity=capacity,
            cpu_percent=stats.cpu_percent,
            rss_bytes=stats.rss_bytes,
            inflight_llm_calls=self.load.inflight_llm_calls,
            llm_requests=self.load.llm_requests,
            populations=list(self._populations),
            loop_lag_s=round(self.progress.lag_s(), 3),
        )


def _grpc_server(secret: str) -> grpc.aio.Server:
    return grpc.aio.server(
        # Peers of a network simulation call the peer plane with a credential of their own.
        interceptors=[RpcSecretInterceptor(secret, peer_credential(secret), PEER_METHODS)],
        # gRPC turns SO_REUSEPORT on by default: a second worker on the same port would then
        # bind "successfully" and the kernel would split connections between two workers.
        options=[
            ("grpc.so_reuseport", 0),
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ],
    )


def _capacity(settings: WorkerSettings) -> int:
    """How many agents this process hosts: as configured, or what its share of memory holds."""
    if settings.capacity is not None:
        return settings.capacity
    return estimate_capacity(
        available_memory_bytes(), settings.procs, settings.bytes_per_agent_budget
    )


def _serve_metrics(metrics: WorkerMetrics, host: str, settings: WorkerSettings) -> WSGIServer:
    """The Prometheus endpoint, over TLS when the node has a certificate (raises OSError)."""
    return serve_metrics(
        metrics,
        host,
        settings.metrics_port,
        certfile=str(settings.tls_cert) if settings.tls_cert else None,
        keyfile=str(settings.tls_key) if settings.tls_key else None,
    )


def _bind(server: grpc.aio.Server, bind_address: str, settings: WorkerSettings) -> tuple[int, str]:
    """The bound port (0: not bound) and why binding failed."""
    try:
        port = _listen(server, bind_address, settings)
    except RuntimeError as exc:  # grpc raises this when the address cannot be bound
        return 0, str(exc)
    return port, "port in use or address not available"


def _listen(server: grpc.aio.Server, bind_address: str, settings: WorkerSettings) -> int:
    """Bind the gRPC port: TLS only when the node has a certificate, plaintext otherwise."""
    if settings.tls_cert is None or settings.tls_key is None:
        return server.add_insecure_port(bind_address)
    credentials = grpc.ssl_server_credentials(
        [(settings.tls_key.read_bytes(), settings.tls_cert.read_bytes())]
    )
    return server.add_secure_port(bind_address, credentials)


def _fail(message: str) -> None:
    print(f"populace worker: {message}", file=sys.stderr, flush=True)


def configure_logging(level: str, index: int, log_format: str = "text") -> None:
    role = f"worker[{index}]"
    worker_logs.configure_logging(
        level,
        log_format,
        role=role,
        text=f"%(asctime)s {role} pid=%(process)d %(levelname)s %(message)s",
    )
    # httpx logs every request at INFO: one line per heartbeat per process is noise.
    logging.getLogger("httpx").setLevel(logging.WARNING)


def run_process(settings: WorkerSettings, *, slot: int = 0, parent_pid: int | None = None) -> int:
    """Run one worker process until it stops; returns its exit code."""
    try:
        import uvloop
    except ImportError:  # uvloop is optional (e.g. Windows): the stdlib loop works, just slower
        loop_factory = None
    else:
        loop_factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(WorkerProcess(settings, slot=slot, parent_pid=parent_pid).run())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m worker_server.process",
        description="One populace worker process; settings come from POPULACE_* variables.",
    )
    parser.add_argument(
        "--parent-pid", type=int, default=None, help="exit when this supervisor process is gone"
    )
    parser.add_argument(
        "--index", type=int, default=0, help="this process's slot on the node (0, 1, ...)"
    )
    args = parser.parse_args(argv)
    if args.index < 0:
        _fail(f"--index must be >= 0, got {args.index}")
        return ExitCode.CONFIG
    try:
        settings = WorkerSettings()
    except ValidationError as exc:
        _fail(f"invalid settings: {exc}")
        return ExitCode.CONFIG
    configure_logging(settings.log_level, args.index, settings.log_format)
    return run_process(settings, slot=args.index, parent_pid=args.parent_pid)


if __name__ == "__main__":
    sys.exit(main())
