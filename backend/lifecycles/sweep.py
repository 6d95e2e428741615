"""A sweep's statuses: it runs until its grid is played, it fails or it is cancelled."""

from __future__ import annotations

from typing import Literal, get_args

from backend.lifecycles import machine

SweepStatus = Literal["running", "completed", "failed", "cancelled"]
SWEEP_STATUSES: tuple[str, ...] = get_args(SweepStatus)
RUNNING: SweepStatus = "running"
COMPLETED: SweepStatus = "completed"
FAILED: SweepStatus = "failed"
CANCELLED: SweepStatus = "cancelled"

FINAL: tuple[str, ...] = (COMPLETED, FAILED, CANCELLED)
TRANSITIONS: dict[str, tuple[str, ...]] = {
    RUNNING: FINAL,
    COMPLETED: (),
    FAILED: (),
    CANCELLED: (),
}
MACHINE = machine("sweep", SWEEP_STATUSES, TRANSITIONS, final=FINAL, initial=(RUNNING,))
check_transition = MACHINE.check


def is_final(status: str) -> bool:
    return status in FINAL
