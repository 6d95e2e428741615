"""The worker plane over HTTP: register, heartbeat and deregister with the manager.

Every answer the caller must act on differently is a distinct exception, so the lifecycle
(lifecycle.py) maps outcomes to transitions without looking at status codes. JSON only.
"""

from __future__ import annotations

import math
import ssl
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from worker_server.worker_states import ONLINE

DEFAULT_TIMEOUT_S = 5.0
# How long an idle connection to the manager is kept (the manager keeps its end longer).
KEEPALIVE_S = 120.0
# Deregistration happens while shutting down: it must never hold the exit up for long.
DEREGISTER_TIMEOUT_S = 1.0


class ManagerError(Exception):
    """Base of every outcome other than success."""


class JoinTokenRejected(ManagerError):
    """401: the join token is wrong; retrying cannot help, the worker exits non-zero."""


class UnknownWorker(ManagerError):
    """404 on heartbeat: the manager does not know this id (fresh DB), or 409: another
    registration took this id over (our lease is superseded); register again."""


class WorkerRemoved(ManagerError):
    """410: an operator removed this worker; shut down cleanly with exit 0."""


class ManagerUnavailable(ManagerError):
    """Connection error, timeout, 5xx or an unreadable answer: retry with backoff."""


class ManagerRejected(ManagerError):
    """Another 4xx (e.g. 422): the request itself is wrong, so retrying cannot help."""

    def __init__(self, status_code: int, detail: Any) -> None:
        super().__init__(f"HTTP {status_code}: {detail}")
        self.status_code = status_code
        self.detail = detail


@dataclass(frozen=True)
class Registration:
    worker_id: int
    # Proves later calls come from this registration: ids restart when the manager's store does,
    # so a stale id alone could name another process's row.
    lease: str
    heartbeat_interval_s: float
    ttl_s: float


@dataclass(frozen=True)
class HeartbeatAnswer:
    state: str  # "online" | "draining"
    # The cadence to keep from now on (it grows with the fleet); None from a manager that does
    # not say (the registration's holds).
    heartbeat_interval_s: float | None = None
    ttl_s: float | None = None


@dataclass(frozen=True)
class HeartbeatReport:
    agents: int
    capacity: int
    cpu_percent: float
    rss_bytes: int
    inflight_llm_calls: int
    # LLM requests sent since the process started (a counter: the manager derives a rate).
    llm_requests: int = 0
    # The ids of the populations hosted (the manager's reaper compares them with its store).
    populations: list[str] = field(default_factory=list)
    # Seconds since the process's event loop last ran (heartbeats come from another thread, so
    # a beat alone does not say the loop works: worker_server.plane).
    loop_lag_s: float = 0.0


NO_LEASE = "none"

# Statuses that mean "the manager is there but cannot answer now", so a retry can succeed.
_RETRYABLE_STATUSES = frozenset({408, 425, 429})


def _detail(response: httpx.Response) -> Any:
    try:
        body = response.json()
    except ValueError:
        return response.text[:200] or response.reason_phrase
    return body.get("detail", body) if isinstance(body, dict) else body


def _json_object(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError as exc:
        raise ManagerUnavailable(
            f"{response.request.url} answered {response.status_code} with non-JSON content"
        ) from exc
    if not isinstance(body, dict):
        raise ManagerUnavailable(f"{response.request.url} answered a JSON {type(body).__name__}")
    return body


class ManagerClient:
    """Async client of the manager's worker plane, authenticated with the join token."""

    def __init__(
        self,
        base_url: str,
        join_token: str,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        transport: httpx.AsyncBaseTransport | None = None,
        ca_file: Path | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.AsyncClient(
            # HTTPS is verified against the cluster's CA when given, else the system's roots.
            verify=ssl.create_default_context(cafile=ca_file) if ca_file else True,
            base_url=self.base_url,
            headers={"Authorization": f"Bearer {join_token}", "Accept": "application/json"},
            timeout=timeout_s,
            transport=transport,
            # A worker talks to one manager; an environment proxy is almost never meant for it.
            trust_env=False,
            # One connection kept open between beats, however long the interval the manager
            # asks for (a new TCP and TLS handshake per beat costs the manager more than the
            # beat); the manager keeps idle connections longer (http_keep_alive_s).
            limits=httpx.Limits(max_connections=4, keepalive_expiry=KEEPALIVE_S),
        )
        self._leases: dict[int, str] = {}

    async def __aenter__(self) -> ManagerClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def register(
        self,
        *,
        node: str,
        address: str,
        pid: int,
        capacity: int,
        version: str,
        slot: int | None = None,
        rpc_secret: str,
        tls: bool = False,
        labels: dict[str, str] | None = None,
        plugins: dict[str, str] | None = None,
    ) -> Registration:
        """Register one process; `slot` is its place on the node (see process.py).

        (node, slot) is what lets the manager know a restarted process as the same worker; a
        caller that has no slot leaves it out of the request. `rpc_secret` is what the manager
        must present on our gRPC calls (it checks us with it before answering), `tls` whether
        our gRPC port speaks TLS, `plugins` the simulation plugins we can run (name: version).
        """
        body: dict[str, Any] = {
            "node": node,
            "address": address,
            "pid": pid,
            "capacity": capacity,
            "version": version,
            "rpc_secret": rpc_secret,
            "tls": tls,
        }
        if labels:
            body["labels"] = labels
        if plugins:
            body["plugins"] = plugins
        if slot is not None:
            if slot < 0:
                raise ValueError(f"slot must be >= 0, got {slot}")
            body["slot"] = slot
        response = await self._post("/api/workers/register", json=body)
        self._raise_for_status(response, worker_id=None)
        data = _json_object(response)
        try:
            registration = Registration(
                worker_id=int(data["id"]),
                lease=str(data["lease"]),
                heartbeat_interval_s=float(data["heartbeat_interval_s"]),
                ttl_s=float(data["ttl_s"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ManagerUnavailable(f"unexpected registration answer: {data!r}") from exc
        interval = registration.heartbeat_interval_s
        if not (math.isfinite(interval) and interval > 0):
            raise ManagerUnavailable(f"unusable heartbeat interval in {data!r}")
        self._leases[registration.worker_id] = registration.lease
        return registration

    async def heartbeat(self, worker_id: int, report: HeartbeatReport) -> HeartbeatAnswer:
        """Send stats; returns the state the manager holds for us and the cadence it asks for."""
        body = {**asdict(report), "lease": self._lease(worker_id)}
        response = await self._post(f"/api/workers/{worker_id}/heartbeat", json=body)
        self._raise_for_status(response, worker_id=worker_id)
        data = _json_object(response)
        return HeartbeatAnswer(
            state=str(data.get("state", ONLINE)),
            heartbeat_interval_s=_positive(data.get("heartbeat_interval_s")),
            ttl_s=_positive(data.get("ttl_s")),
        )

    async def deregister(self, worker_id: int, *, timeout_s: float = DEREGISTER_TIMEOUT_S) -> None:
        body = {"lease": self._lease(worker_id)}
        response = await self._post(
            f"/api/workers/{worker_id}/deregister", json=body, timeout=timeout_s
        )
        if response.status_code in (404, 410):  # already gone: deregistration is idempotent
            return
        self._raise_for_status(response, worker_id=worker_id)

    def _lease(self, worker_id: int) -> str:
        # Without a lease of ours the call still goes out, and the manager's answer (404, 401,
        # 410...) decides, as for any call: the manager never issues this value as a lease.
        return self._leases.get(worker_id, NO_LEASE)

    async def _post(self, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return await self._http.post(path, **kwargs)
        except httpx.HTTPError as exc:  # connect refused, DNS, timeouts, broken connections
            raise ManagerUnavailable(f"{type(exc).__name__}: {exc}".rstrip(": ")) from exc

    @staticmethod
    def _raise_for_status(response: httpx.Response, *, worker_id: int | None) -> None:
        status = response.status_code
        if status < 300:
            return
        detail = _detail(response)
        if status == 401:
            raise JoinTokenRejected(f"401 {detail}")
        if status in (404, 409) and worker_id is not None:
            raise UnknownWorker(f"{status} {detail}")
        if status == 410:
            raise WorkerRemoved(f"410 {detail}")
        if status >= 500 or status in _RETRYABLE_STATUSES:
            raise ManagerUnavailable(f"HTTP {status}: {detail}")
        raise ManagerRejected(status, detail)


def _positive(value: Any) -> float | None:
    """A usable number of seconds from an answer, or None (missing or nonsense is ignored)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None
