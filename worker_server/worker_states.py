"""A worker's states as the manager keeps them, and what each state counts for: the one owner.

The manager stores the state on the worker row (backend.db.models checks it against
WORKER_STATES), answers it to the worker's heartbeat (the worker follows "draining"), and the
dashboard reads the same lists from frontend/src/generated/rules.ts (scripts/gen_rules.py).
Shared by the manager and the workers, so plain Python only.
"""

from __future__ import annotations

from typing import Literal, get_args

from worker_server.state_machine import StateMachine

WorkerState = Literal["online", "offline", "draining", "removed"]
WORKER_STATES: tuple[str, ...] = get_args(WorkerState)
ONLINE: WorkerState = "online"
OFFLINE: WorkerState = "offline"
# Live, but takes no new agents: an operator is emptying it.
DRAINING: WorkerState = "draining"
# Gone for good (its identity may be claimed again); its rows stay for the history.
REMOVED: WorkerState = "removed"

# A worker that is not removed may be written into any state (registered again, offline when its
# lease lapses, drained and undrained, removed); a removed one is never revived (its identity
# makes a new row).
FINAL_STATES: tuple[str, ...] = (REMOVED,)
TRANSITIONS: dict[str, tuple[str, ...]] = {
    state: () if state in FINAL_STATES else WORKER_STATES for state in WORKER_STATES
}
MACHINE = StateMachine("worker", WORKER_STATES, TRANSITIONS, final=FINAL_STATES, initial=(ONLINE,))
check_transition = MACHINE.check

# A live worker hosts agents and heartbeats; the others do neither.
LIVE_STATES: tuple[str, ...] = (ONLINE, DRAINING)
# A worker in these takes new agents (placement, deploys) and its capacity counts as free room.
PLACING_STATES: tuple[str, ...] = (ONLINE,)


def is_live(state: str) -> bool:
    """It hosts agents and heartbeats: rounds, interviews and clean-ups reach it."""
    return state in LIVE_STATES


def takes_agents(state: str) -> bool:
    """New agents may be placed on it, so its capacity counts."""
    return state in PLACING_STATES


def states_for_clients() -> dict[str, object]:
    """The lists the dashboard needs, as JSON-able values."""
    return {
        "WORKER_STATES": list(WORKER_STATES),
        "LIVE_STATES": list(LIVE_STATES),
        "PLACING_STATES": list(PLACING_STATES),
    }
