"""Riding out a database outage in a run: what counts as one, and retrying through it.

A run writes and reads the store all through its rounds (status, placement, each round's
commit). A dropped connection (Postgres restarted, a backend terminated, a network blip) is not
a reason to fail a run: the same call is tried again with a growing pause, for a bounded window
(`round_store_retry_s`), and the run goes on by itself when the database answers within it.
Past the window the run pauses with a plain reason (StoreUnavailable); every kept round is
whole, since a round is written in one transaction and a retried commit of a round already kept
leaves it as it is (backend.simulations.store.save_round).

Only connection-level failures are retried: an error the database would give again (a
constraint, bad SQL) is a bug, and retrying it would only hide it.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from sqlalchemy import exc as sa_exc

from backend.simulations.environment import SimulationPaused

log = logging.getLogger(__name__)
T = TypeVar("T")

FIRST_PAUSE_S = 0.1
LONGEST_PAUSE_S = 2.0
# The asyncpg errors of a connection that broke under a call (terminated backend, closed socket,
# a protocol left mid-operation), matched by name so this module needs no driver import.
_DRIVER_OUTAGES = {
    "ConnectionDoesNotExistError",
    "ConnectionFailureError",
    "InterfaceError",
    "InternalClientError",
    "AdminShutdownError",
    "CrashShutdownError",
    "CannotConnectNowError",
    "TooManyConnectionsError",
    "PostgresConnectionError",
    "ClientCannotConnectError",
    "ConnectionRejectionError",
}


# SQLSTATE classes of a database that cannot be reached or is going away: connection
# exceptions, operator intervention (shutdown, terminated backends, "cannot connect now"),
# too many connections.
_OUTAGE_STATES = ("08", "57P", "53300")


def _outage_state(error: BaseException) -> bool:
    state = getattr(error, "sqlstate", None)
    if not isinstance(state, str):
        return False
    # 55000 is many things; a database that does not take connections (ALLOW_CONNECTIONS
    # false, or one being dropped) is an outage.
    if state == "55000":
        return "not currently accepting connections" in str(error)
    return state.startswith(_OUTAGE_STATES)


class StoreUnavailable(SimulationPaused):
    """The database stayed unreachable for the whole retry window: the run pauses."""


def is_store_outage(error: BaseException) -> bool:
    """True for errors of a lost or unusable database connection (worth another try)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, sa_exc.DBAPIError) and current.connection_invalidated:
            return True
        if isinstance(
            current,
            (
                sa_exc.OperationalError,
                sa_exc.InterfaceError,
                sa_exc.PendingRollbackError,
                sa_exc.TimeoutError,  # the pool had no connection to give in time
                ConnectionError,
                TimeoutError,
                OSError,
            ),
        ):
            return True
        if type(current).__name__ in _DRIVER_OUTAGES or _outage_state(current):
            return True
        current = getattr(current, "orig", None) or current.__cause__ or current.__context__
    return False


def unavailable_reason(window_s: float) -> str:
    return (
        f"the database could not be reached for {window_s:g} s; the run paused with every "
        "kept round intact: resume it once the database answers again"
    )


async def retry_store(
    call: Callable[[], Awaitable[T]],
    *,
    window_s: float,
    what: str,
    on_outage: Callable[[], None] | None = None,
) -> T:
    """call(), tried again while it fails with a database outage, for up to window_s
    (math.inf: until it works or the caller is cancelled); then StoreUnavailable.
    on_outage is called once, at the first failure (to tell the run's timeline)."""
    deadline = time.monotonic() + window_s
    pause = FIRST_PAUSE_S
    failures = 0
    while True:
        try:
            return await call()
        except Exception as error:
            if not is_store_outage(error):
                raise
            failures += 1
            if failures == 1 and on_outage is not None:
                on_outage()
            if time.monotonic() + pause > deadline:
                log.error("%s: the database stayed unreachable: %r", what, error)
                raise StoreUnavailable(unavailable_reason(window_s)) from error
            log.warning(
                "%s: the database is unreachable (%s); trying again in %.1f s",
                what,
                type(error).__name__,
                pause,
            )
        await asyncio.sleep(pause)
        pause = min(pause * 2, LONGEST_PAUSE_S)


FOREVER = math.inf
