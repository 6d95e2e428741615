"""A lifecycle as data: its states, which state may follow which, and where it ends.

Each lifecycle's module (worker_server/worker_states.py, backend/lifecycles/) builds one
StateMachine; the code that changes a state asks it (`check`) or, for a conditional UPDATE,
takes its WHERE list from it (`sources`), so the table is the only place a transition is
allowed. Shared by the manager and the workers, so plain Python only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


class IllegalTransition(ValueError):
    """A state change the lifecycle's table does not allow."""

    def __init__(self, lifecycle: str, current: str, target: str) -> None:
        super().__init__(f"a {lifecycle} cannot go from {current} to {target}")
        self.lifecycle = lifecycle
        self.current = current
        self.target = target


@dataclass(frozen=True)
class StateMachine:
    """`transitions[s]`: the states s may change to (s itself when it may be written again).
    `final`: the states in which the thing is over; a final state may still have ways out
    (a failed simulation can be resumed), the table says which."""

    name: str
    states: tuple[str, ...]
    transitions: Mapping[str, tuple[str, ...]]
    final: tuple[str, ...] = ()
    # The states a new row starts in.
    initial: tuple[str, ...] = ()
    # What check raises: the manager's lifecycles raise a subclass its API answers with 409.
    error: type[IllegalTransition] = IllegalTransition
    _sources: dict[str, tuple[str, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        known = set(self.states)
        named = set(self.transitions) | set(self.final) | set(self.initial)
        for targets in self.transitions.values():
            named |= set(targets)
        if not named <= known:
            raise ValueError(f"{self.name}: unknown states {sorted(named - known)}")
        if set(self.transitions) != known:
            raise ValueError(f"{self.name}: the table needs a row for every state")
        sources = {
            target: tuple(s for s in self.states if target in self.transitions[s])
            for target in self.states
        }
        object.__setattr__(self, "_sources", sources)

    def allows(self, current: str, target: str) -> bool:
        return target in self.transitions.get(current, ())

    def check(self, current: str, target: str) -> None:
        """Raises IllegalTransition (naming both) unless current may change to target."""
        if not self.allows(current, target):
            raise self.error(self.name, current, target)

    def sources(self, target: str, among: Iterable[str] | None = None) -> tuple[str, ...]:
        """The states from which target may be reached (those of `among` only, when given),
        in the table's order: the WHERE list of a conditional UPDATE to target."""
        found = self._sources[target]
        if among is None:
            return found
        keep = set(among)
        return tuple(s for s in found if s in keep)

    def is_final(self, state: str) -> bool:
        return state in self.final

    def for_clients(self) -> dict[str, object]:
        """The table as JSON-able values, for the dashboard's generated copy."""
        return {
            "states": list(self.states),
            "final": list(self.final),
            "transitions": {s: list(self.transitions[s]) for s in self.states},
        }
