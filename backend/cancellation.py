"""Cancellation that stays a cancellation, in the manager's background loops.

A task cancelled in the middle of a database call does not always see a CancelledError: the
driver's clean-up can fail on the half-closed connection and raise its own error instead
(SQLAlchemy's PendingRollbackError, asyncpg's InterfaceError), with the CancelledError only as
its context. A loop that catches Exception to outlive transient faults would then retry
forever, and a manager told to stop would never finish. The task still counts the request
(`Task.cancelling()`), so the loops ask it: after every caught error, and after every pass (a
cancellation may have been swallowed deeper down).
"""

from __future__ import annotations

import asyncio


def cancelling() -> bool:
    """Whether the current task was asked to stop (and has not taken the request back)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def stop_if_cancelled(error: BaseException | None = None) -> None:
    """Raise CancelledError (from `error`, the exception that replaced it) when the current task
    was asked to stop; otherwise return."""
    if cancelling():
        raise asyncio.CancelledError() from error
