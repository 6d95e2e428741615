"""A population's statuses: deployed (or degraded) between a deploy and a delete."""

from __future__ import annotations

from typing import Literal, get_args

from backend.lifecycles import machine

PopulationStatus = Literal["deploying", "deployed", "degraded", "failed", "deleting", "deleted"]
POPULATION_STATUSES: tuple[str, ...] = get_args(PopulationStatus)
# Its deploy is sampling, storing and creating its agents.
DEPLOYING: PopulationStatus = "deploying"
# Every agent hosted by a live worker.
DEPLOYED: PopulationStatus = "deployed"
# Some agents hosted nowhere (a worker lost, no room): it still plays, and is repaired.
DEGRADED: PopulationStatus = "degraded"
# Its deploy failed (or was undone at a start-up); its rows are gone.
FAILED: PopulationStatus = "failed"
# Its agents are being taken off the workers and its rows deleted.
DELETING: PopulationStatus = "deleting"
DELETED: PopulationStatus = "deleted"

# Its agents are placed: it can play, and be repaired.
PLAYABLE: tuple[str, ...] = (DEPLOYED, DEGRADED)
# Its agents may be on workers (a deleting one's until its rows are gone): kept by the reaper.
HOLDING: tuple[str, ...] = (DEPLOYING, DEPLOYED, DEGRADED, DELETING)
# Work in flight that a manager's start-up finishes (a deploy is undone, a delete completed).
IN_FLIGHT: tuple[str, ...] = (DEPLOYING, DELETING)
# Over: nothing of it is left on the workers or in the agent tables.
FINAL: tuple[str, ...] = (FAILED, DELETED)

# Deleting and its end are written again by a delete that is retried (a delete is idempotent).
TRANSITIONS: dict[str, tuple[str, ...]] = {
    DEPLOYING: (DEPLOYED, DELETING, FAILED),
    DEPLOYED: (DEPLOYED, DEGRADED, DELETING),
    DEGRADED: (DEPLOYED, DEGRADED, DELETING),
    FAILED: (DELETING, FAILED),
    DELETING: (DELETING, DELETED, FAILED),
    DELETED: (DELETED,),
}
MACHINE = machine("population", POPULATION_STATUSES, TRANSITIONS, final=FINAL, initial=(DEPLOYING,))
check_transition = MACHINE.check


def is_playable(status: str) -> bool:
    return status in PLAYABLE
