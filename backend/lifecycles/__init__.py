"""Every lifecycle the manager keeps, one module each: its states (a Literal, the tuple the
database's CHECK constraint is built from, a constant per state), which state may follow which
(a StateMachine, worker_server/state_machine.py) and its final and active sets.

A status is written through these: a store's conditional UPDATE takes its WHERE list from the
table (`MACHINE.sources(target)`), other code names states by their constants. The worker's
states live in worker_server/worker_states.py (the workers read them too). The dashboard's
copies are generated from these modules (scripts/gen_rules.py -> frontend/src/generated/rules.ts).
"""

from __future__ import annotations

from collections.abc import Mapping

from backend.errors import Conflict
from worker_server.state_machine import IllegalTransition, StateMachine

__all__ = ["IllegalTransition", "StateMachine", "TransitionRefused", "machine"]


class TransitionRefused(Conflict, IllegalTransition):
    """A status change the lifecycle does not allow (answered 409, naming both states)."""


def machine(
    name: str,
    states: tuple[str, ...],
    transitions: Mapping[str, tuple[str, ...]],
    *,
    final: tuple[str, ...],
    initial: tuple[str, ...],
) -> StateMachine:
    """A manager lifecycle's table, whose refusals are domain errors."""
    return StateMachine(
        name, states, transitions, final=final, initial=initial, error=TransitionRefused
    )
