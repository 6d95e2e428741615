"""Request and response bodies for the worker plane and the cluster API."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator

from backend.db.models import INT32_MAX, INT64_MAX
from backend.db.times import utc_iso
from populace.registry import VERSION_KEY
from worker_server.labels import check_labels

# The states and what they count for are worker_server.worker_states' (re-exported here for the
# API modules that type their bodies with them).
from worker_server.worker_states import LIVE_STATES as LIVE_STATES
from worker_server.worker_states import WorkerState as WorkerState

# A worker reports at most this many plugins (the column is JSON).
MAX_PLUGINS = 200
# What a heartbeat reports besides the lease: stored on the worker row as they are.
STATS_FIELDS = ("agents", "capacity", "cpu_percent", "rss_bytes", "inflight_llm_calls")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RegisterRequest(_Strict):
    node: str = Field(min_length=1, max_length=255)
    address: str = Field(min_length=3, max_length=255, description="host:port of the gRPC server")
    # Bounded by the columns they are stored in (Integer, BigInteger).
    pid: int = Field(gt=0, le=INT32_MAX)
    capacity: int = Field(ge=0, le=INT64_MAX)
    version: str = Field(min_length=1, max_length=64)
    slot: int | None = Field(
        None,
        ge=0,
        le=65535,
        description="the process's index on its node: (node, slot) is the worker's identity, "
        "so a restarted process registers as the same worker",
    )
    rpc_secret: str = Field(
        min_length=16,
        max_length=256,
        pattern=r"^[\x21-\x7e]+$",
        description="the secret the manager must present on this process's gRPC calls; the "
        "manager checks the process at `address` accepts it before registering it",
    )
    tls: bool = Field(False, description="whether the gRPC port speaks TLS")
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="the node's labels (name: value), matched by a population's "
        "placement.node_selector",
    )

    plugins: dict[
        Annotated[str, Field(pattern=VERSION_KEY)],
        Annotated[str, Field(min_length=1, max_length=64)],
    ] = Field(
        default_factory=dict,
        max_length=MAX_PLUGINS,
        description="the simulation plugins this process can run (name: version), and the "
        "policies other packages add to them (plugin:policy: version): a launch is refused up "
        "front where a host lacks the run's plugin or added policy, or has another version",
    )

    @field_validator("labels")
    @classmethod
    def _labels(cls, labels: dict[str, str]) -> dict[str, str]:
        return check_labels(labels)

    @field_validator("address")
    @classmethod
    def _host_port(cls, address: str) -> str:
        host, sep, port = address.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError("must be host:port with a port between 1 and 65535")
        return address


class RegisterResponse(BaseModel):
    id: int
    lease: str
    heartbeat_interval_s: float
    ttl_s: float


class _Leased(_Strict):
    lease: str = Field(min_length=1, max_length=64, description="the lease from registration")


class DeregisterRequest(_Leased):
    pass


class HeartbeatRequest(_Leased):
    agents: int = Field(ge=0, le=INT64_MAX)
    capacity: int = Field(ge=0, le=INT64_MAX)
    cpu_percent: float = Field(ge=0, allow_inf_nan=False)
    rss_bytes: int = Field(ge=0, le=INT64_MAX)
    inflight_llm_calls: int = Field(0, ge=0, le=INT32_MAX)
    llm_requests: int | None = Field(
        None,
        ge=0,
        le=INT64_MAX,
        description="the LLM requests this process sent since it started (a counter): the "
        "manager derives requests per second from it; absent from older workers",
    )
    populations: list[Annotated[str, Field(min_length=1, max_length=255)]] | None = Field(
        None,
        max_length=4096,
        description="ids of the populations this process hosts agents of: the manager's reaper "
        "compares them with its store instead of asking every worker",
    )
    loop_lag_s: float | None = Field(
        None,
        ge=0,
        allow_inf_nan=False,
        description="seconds since the worker's event loop last ran: heartbeats come from a "
        "thread of their own, so a busy loop never silences them; a worker whose loop hangs "
        "stops beating by itself; absent from older workers",
    )


class HeartbeatResponse(BaseModel):
    state: WorkerState
    heartbeat_interval_s: float = Field(
        description="the interval to beat at from now on: it grows with the fleet"
    )
    ttl_s: float = Field(description="silent this long, the worker is offline")


class WorkerOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    node: str
    slot: int | None = None
    address: str
    pid: int
    state: WorkerState
    agents: int
    capacity: int
    cpu_percent: float
    rss_bytes: int
    inflight_llm_calls: int
    version: str
    tls: bool = False
    labels: dict[str, str] = Field(default_factory=dict)
    plugins: dict[str, str] = Field(
        default_factory=dict, description="the simulation plugins it can run (name: version)"
    )
    registered_at: datetime
    last_heartbeat: datetime
    # The fleet's cadence now (backend.workers.liveness cadence()): a dashboard shows a worker
    # silent past ttl_s as late before the manager's sweep marks it offline. Absent in events.
    heartbeat_interval_s: float | None = None
    ttl_s: float | None = None

    @field_serializer("registered_at", "last_heartbeat")
    def _utc_iso(self, value: datetime) -> str:
        return utc_iso(value)


class WorkerPage(BaseModel):
    items: list[WorkerOut]
    next_after: int | None


# -- history and logs (backend.workers.history, the worker's RecentLogs RPC) -------------------


class HistoryPoint(BaseModel):
    t: datetime = Field(description="the start of the bucket")
    cpu_percent: float = Field(description="the mean of the beats in the bucket")
    rss_bytes: int
    agents: int
    llm_requests_per_s: float | None = Field(
        description="null when the worker does not report its request counter, or the bucket "
        "holds its first beat"
    )

    @field_serializer("t")
    def _utc_iso(self, value: datetime) -> str:
        return utc_iso(value)


class WorkerHistoryOut(BaseModel):
    worker_id: int
    bucket_s: float = Field(description="seconds per point")
    window_s: float = Field(description="how far back the points go")
    points: list[HistoryPoint] = Field(description="oldest first; buckets without beats are absent")


class ClusterHistoryPoint(HistoryPoint):
    """The sum of the workers' points for the same bucket; a live worker that did not beat in
    it counts with its previous point."""

    workers: int = Field(
        description="workers counted in the bucket: the live ones, and those that left during it"
    )
    cpu_percent: float = Field(description="the sum of the workers' mean CPU percent")
    llm_requests_per_s: float = Field(description="the sum of the workers' request rates")


class ClusterHistoryOut(BaseModel):
    bucket_s: float
    window_s: float
    points: list[ClusterHistoryPoint] = Field(description="oldest first")


LogLevel = Literal["debug", "info", "warning", "error", "critical"]


class LogLineOut(BaseModel):
    sequence: int = Field(description="the line's number in the process's log, from 1")
    time: datetime
    level: str
    logger: str
    message: str

    @field_serializer("time")
    def _utc_iso(self, value: datetime) -> str:
        return utc_iso(value)


class WorkerLogsOut(BaseModel):
    worker_id: int
    lines: list[LogLineOut] = Field(description="oldest first")
    last_sequence: int = Field(
        description="the newest line's number logged so far: pass it as `after` to follow"
    )
    first_sequence: int = Field(
        description="the oldest line the worker still keeps (older ones were dropped)"
    )
    capacity: int = Field(description="how many lines the worker keeps")
