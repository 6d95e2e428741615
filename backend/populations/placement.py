"""Placement: split a population across online, non-draining workers.

Two spreads (a population's `placement.spread`): `capacity`, shares proportional to free room;
`even`, equal shares per worker process as far as room allows (each process is one core, and a
round lasts as long as its busiest process). Slots come ordered so that nodes take turns
(free_slots), so the odd agents of a share, and a population smaller than the fleet, are spread
across nodes rather than piled on the first one. A node selector keeps a population on the
workers whose node carries its labels.

A population with `placement.dedicated_process` gets a process per agent instead
(place_dedicated): each agent alone on a process that hosts nothing else, for agents heavy
enough to want a core of their own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field

from backend.errors import Conflict
from worker_server.labels import format_labels, matches


@dataclass(frozen=True)
class Slot:
    worker_id: int
    address: str
    free: int
    capacity: int = 0
    node: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)


class NotEnoughCapacity(Conflict):
    def __init__(self, wanted: int, free: int, workers: int, selector: Mapping[str, str]) -> None:
        where = (
            f"online worker(s) labelled {format_labels(dict(selector))}"
            if selector
            else ("online worker(s)")
        )
        super().__init__(
            f"size {wanted} is more than the cluster's free capacity: {free} agents fit on "
            f"{workers} {where}"
        )
        self.wanted, self.free = wanted, free


class NotEnoughProcesses(Conflict):
    """Fewer free worker processes than a dedicated population has agents."""

    def __init__(self, wanted: int, free: int, online: int, selector: Mapping[str, str]) -> None:
        where = f" labelled {format_labels(dict(selector))}" if selector else ""
        super().__init__(
            f"placement.dedicated_process: {wanted} agents need {wanted} free worker processes "
            f"(one each, hosting nothing else); {free} of the {online} online worker "
            f"process(es){where} are free: start workers with more --procs or on more nodes, "
            "or delete a population to free its processes"
        )
        self.wanted, self.free = wanted, free


def eligible(slots: Sequence[Slot], selector: Mapping[str, str]) -> list[Slot]:
    """The slots whose node carries the selector's labels, nodes taking turns."""
    chosen = [s for s in slots if matches(dict(s.labels), dict(selector))]
    rank: dict[str, int] = {}
    turns = []
    for slot in sorted(chosen, key=lambda s: s.worker_id):
        turns.append((rank.get(slot.node, 0), slot.node, slot.worker_id, slot))
        rank[slot.node] = rank.get(slot.node, 0) + 1
    return [slot for *_, slot in sorted(turns, key=lambda t: t[:3])]


def place(
    size: int,
    slots: Sequence[Slot],
    spread: str = "capacity",
    selector: Mapping[str, str] | None = None,
) -> list[tuple[Slot, int]]:
    """(slot, count) pairs with count > 0, in the order of `slots`, never above a slot's free
    room; NotEnoughCapacity when the room is short (`selector` only names it in the error)."""
    usable = [s for s in slots if s.free > 0]
    total = sum(s.free for s in usable)
    if size > total:
        raise NotEnoughCapacity(size, total, len(usable), selector or {})
    if size == 0:
        return []
    counts = _even(size, usable) if spread == "even" else _by_capacity(size, usable, total)
    return [(s, n) for s, n in zip(usable, counts, strict=True) if n > 0]


def is_free_process(slot: Slot, taken: Set[int]) -> bool:
    """Whether a process may take an agent of its own: it has room and is not `taken` (agents
    the store places there, or a deploy in flight chose it). The store, not the heartbeat,
    says what a process hosts: a heartbeat still counts the agents of a population deleted a
    second ago, and agents unknown to the store are the reaper's to remove."""
    return slot.capacity > 0 and slot.worker_id not in taken


def place_dedicated(
    size: int,
    slots: Sequence[Slot],
    taken: Set[int],
    selector: Mapping[str, str] | None = None,
) -> list[tuple[Slot, int]]:
    """(slot, 1) for each of `size` agents, on the first free processes in the order of
    `slots` (nodes taking turns); NotEnoughProcesses when fewer are free."""
    free = [s for s in slots if is_free_process(s, taken)]
    if size > len(free):
        raise NotEnoughProcesses(size, len(free), len(slots), selector or {})
    return [(slot, 1) for slot in free[:size]]


def _by_capacity(size: int, usable: list[Slot], total: int) -> list[int]:
    exact = [size * s.free / total for s in usable]
    counts = [int(x) for x in exact]
    # Hand the remaining agents to the largest fractional parts (ties: earlier slot first).
    order = sorted(range(len(usable)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[: size - sum(counts)]:
        counts[i] += 1
    return counts


def _even(size: int, usable: list[Slot]) -> list[int]:
    """Water-filling: the smallest rooms are filled first; the others share the rest equally
    (the odd agents to the earlier slots)."""
    counts = [0] * len(usable)
    pending = sorted(range(len(usable)), key=lambda i: (usable[i].free, i))
    remaining = size
    while pending:
        fair, extra = divmod(remaining, len(pending))
        smallest = pending[0]
        if usable[smallest].free <= fair:
            counts[smallest] = usable[smallest].free
            remaining -= counts[smallest]
            pending.pop(0)
            continue
        # Every pending slot has room for fair + 1.
        for turn, i in enumerate(sorted(pending)):
            counts[i] = fair + (1 if turn < extra else 0)
        break
    return counts
