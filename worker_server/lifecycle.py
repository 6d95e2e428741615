"""The registration lifecycle of one worker process, as a pure state machine.

No sockets and no clock: the driver in process.py performs the action `next_action()` asks
for and feeds the outcome back, so every transition is unit-tested without a manager
(the dask/distributed worker-state style).

    unregistered --registered--> registered --unknown_worker--> unregistered (new id next)
         |                           |
         +------- stop / removed / join_token_rejected / rejected ------> stopping
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from worker_server.exit_codes import ExitCode
from worker_server.worker_states import ONLINE

BACKOFF_BASE_S = 0.5
# Capped so a worker notices a restarted manager within seconds, not minutes.
BACKOFF_CAP_S = 10.0


class Phase(StrEnum):
    UNREGISTERED = "unregistered"
    REGISTERED = "registered"
    STOPPING = "stopping"


class StopReason(StrEnum):
    SIGNAL = "signal"  # SIGTERM/SIGINT
    PARENT_DIED = "parent_died"  # the supervisor is gone: never leave an orphan behind
    REMOVED = "removed"  # 410: an operator removed this worker
    JOIN_TOKEN_REJECTED = "join_token_rejected"  # 401
    REJECTED = "rejected"  # another 4xx: our request is wrong, retrying cannot help


_EXIT_CODES = {
    StopReason.SIGNAL: ExitCode.OK,
    StopReason.PARENT_DIED: ExitCode.OK,
    StopReason.REMOVED: ExitCode.OK,
    StopReason.JOIN_TOKEN_REJECTED: ExitCode.JOIN_TOKEN_REJECTED,
    StopReason.REJECTED: ExitCode.CONFIG,
}
# Only a voluntary stop deregisters: a removed worker is already gone, and a rejected
# token would be rejected again.
_DEREGISTER_ON = frozenset({StopReason.SIGNAL, StopReason.PARENT_DIED})


@dataclass(frozen=True)
class Register:
    delay_s: float


@dataclass(frozen=True)
class Heartbeat:
    worker_id: int
    delay_s: float


@dataclass(frozen=True)
class Shutdown:
    reason: StopReason
    exit_code: ExitCode
    # The id to deregister before exiting, or None when there is nothing to deregister.
    deregister_id: int | None


Action = Register | Heartbeat | Shutdown


def backoff_delay(
    failures: int, *, base_s: float = BACKOFF_BASE_S, cap_s: float = BACKOFF_CAP_S
) -> float:
    """Capped exponential backoff: 0 before any failure, then base, 2*base, ... up to cap."""
    if failures <= 0:
        return 0.0
    return min(cap_s, base_s * 2 ** min(failures - 1, 32))


class RegistrationLifecycle:
    def __init__(self) -> None:
        self.phase = Phase.UNREGISTERED
        self.worker_id: int | None = None
        self.heartbeat_interval_s = 1.0
        self.ttl_s = 3.0
        # What the manager last said about us ("online" | "draining"); the agent runtime will read it.
        self.manager_state: str | None = None
        # Consecutive failures to reach the manager; drives the backoff.
        self.failures = 0
        self.registrations = 0
        self.stop_reason: StopReason | None = None
        self._registered_id_at_stop: int | None = None

    @property
    def stopping(self) -> bool:
        return self.phase is Phase.STOPPING

    def next_action(self) -> Action:
        if self.phase is Phase.STOPPING:
            assert self.stop_reason is not None
            return Shutdown(
                reason=self.stop_reason,
                exit_code=_EXIT_CODES[self.stop_reason],
                deregister_id=(
                    self._registered_id_at_stop if self.stop_reason in _DEREGISTER_ON else None
                ),
            )
        delay = backoff_delay(self.failures)
        if self.phase is Phase.UNREGISTERED:
            return Register(delay_s=delay)
        assert self.worker_id is not None
        return Heartbeat(
            worker_id=self.worker_id,
            delay_s=delay if self.failures else self.heartbeat_interval_s,
        )

    # Outcomes reported by the driver. Once stopping, they are ignored: the first reason wins.

    def registered(self, worker_id: int, heartbeat_interval_s: float, ttl_s: float) -> None:
        if self.stopping:
            # A registration that raced a stop still has to be undone at the manager.
            self._registered_id_at_stop = worker_id
            return
        if heartbeat_interval_s <= 0:
            raise ValueError(f"heartbeat interval must be > 0, got {heartbeat_interval_s}")
        self.phase = Phase.REGISTERED
        self.worker_id = worker_id
        self.heartbeat_interval_s = heartbeat_interval_s
        self.ttl_s = ttl_s
        self.manager_state = ONLINE
        self.failures = 0
        self.registrations += 1

    def heartbeat_ok(
        self,
        manager_state: str,
        heartbeat_interval_s: float | None = None,
        ttl_s: float | None = None,
    ) -> None:
        """The manager's answer: our state, and the cadence it asks for now (it grows with the
        fleet; None keeps the one we have)."""
        if self.stopping:
            return
        self.manager_state = manager_state
        self.failures = 0
        if heartbeat_interval_s is not None and heartbeat_interval_s > 0:
            self.heartbeat_interval_s = heartbeat_interval_s
        if ttl_s is not None and ttl_s > 0:
            self.ttl_s = ttl_s

    def manager_unavailable(self) -> None:
        if not self.stopping:
            self.failures += 1

    def unknown_worker(self) -> None:
        """404 on heartbeat: the manager forgot us (fresh database), so register again for a new id."""
        if self.stopping:
            return
        self.phase = Phase.UNREGISTERED
        self.worker_id = None
        self.manager_state = None
        self.failures = 0

    def removed(self) -> None:
        self.stop(StopReason.REMOVED)

    def join_token_rejected(self) -> None:
        self.stop(StopReason.JOIN_TOKEN_REJECTED)

    def rejected(self) -> None:
        self.stop(StopReason.REJECTED)

    def stop(self, reason: StopReason) -> None:
        if self.stopping:
            return
        self._registered_id_at_stop = self.worker_id if self.phase is Phase.REGISTERED else None
        self.phase = Phase.STOPPING
        self.stop_reason = reason
