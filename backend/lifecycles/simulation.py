"""A simulation run's statuses, and the timeline entry each change of status writes."""

from __future__ import annotations

from typing import Literal, get_args

from backend.lifecycles import machine

SimulationStatus = Literal["pending", "running", "paused", "completed", "failed", "cancelled"]
SIMULATION_STATUSES: tuple[str, ...] = get_args(SimulationStatus)
# Launched, its runner not started yet.
PENDING: SimulationStatus = "pending"
RUNNING: SimulationStatus = "running"
# Stopped by an operator or an outage, to be resumed after its last kept round.
PAUSED: SimulationStatus = "paused"
COMPLETED: SimulationStatus = "completed"
FAILED: SimulationStatus = "failed"
CANCELLED: SimulationStatus = "cancelled"

# A population runs at most one simulation at a time; these are the statuses that hold it
# (a partial unique index in the database).
ACTIVE: tuple[str, ...] = (PENDING, RUNNING, PAUSED)
# The run is over: finished_at is set and it may be deleted. A failed run may still be resumed.
FINAL: tuple[str, ...] = (COMPLETED, FAILED, CANCELLED)
# Playing, or about to: an operator may pause it, a manager's start-up resumes it at once (a
# paused run waits for an operator).
PLAYING: tuple[str, ...] = (PENDING, RUNNING)
# What a resume starts from (it goes back to running).
RESUMABLE: tuple[str, ...] = (PAUSED, FAILED)

# An active run may be written into any status but pending (a new run's only); a finished one
# is left only by a resume.
TRANSITIONS: dict[str, tuple[str, ...]] = {
    PENDING: (RUNNING, PAUSED, COMPLETED, FAILED, CANCELLED),
    RUNNING: (RUNNING, PAUSED, COMPLETED, FAILED, CANCELLED),
    PAUSED: (RUNNING, PAUSED, COMPLETED, FAILED, CANCELLED),
    COMPLETED: (),
    FAILED: (RUNNING,),
    CANCELLED: (),
}
MACHINE = machine("simulation", SIMULATION_STATUSES, TRANSITIONS, final=FINAL, initial=(PENDING,))
check_transition = MACHINE.check


def is_active(status: str) -> bool:
    return status in ACTIVE


def is_final(status: str) -> bool:
    return status in FINAL


# -- the run's timeline ------------------------------------------------------------------------

# What a run's timeline records: each change of status (its kind named after the change), each
# kept round and each fault.
LAUNCHED = "launched"
STARTED = "started"
RESUMED = "resumed"
ROUND = "round"
FAULT = "fault"
TIMELINE_KINDS: tuple[str, ...] = (
    LAUNCHED,
    STARTED,
    ROUND,
    FAULT,
    PAUSED,
    RESUMED,
    CANCELLED,
    FAILED,
    COMPLETED,
)
# The status each kind of entry leaves a run in (to tell a resume from a start after a restart).
STATUS_OF_KIND: dict[str, str] = {
    LAUNCHED: PENDING,
    STARTED: RUNNING,
    RESUMED: RUNNING,
    PAUSED: PAUSED,
    CANCELLED: CANCELLED,
    FAILED: FAILED,
    COMPLETED: COMPLETED,
}
