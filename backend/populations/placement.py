"""Placement: split a population across online, non-draining workers by free capacity."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Slot:
    worker_id: int
    address: str
    free: int
    capacity: int = 0


class NotEnoughCapacity(Exception):
    def __init__(self, wanted: int, free: int, workers: int) -> None:
        super().__init__(
            f"size {wanted} is more than the cluster's free capacity: {free} agents fit on "
            f"{workers} online worker(s)"
        )
        self.wanted, self.free = wanted, free


def place(size: int, slots: Sequence[Slot]) -> list[tuple[Slot, int]]:
    """Shares proportional to free capacity (largest remainder), never above a worker's free room.

    Returns (slot, count) pairs with count > 0, in the order of `slots`.
    """
    usable = [s for s in slots if s.free > 0]
    total = sum(s.free for s in usable)
    if size > total:
        raise NotEnoughCapacity(size, total, len(usable))
    if size == 0:
        return []
    exact = [size * s.free / total for s in usable]
    counts = [int(x) for x in exact]
    # Hand the remaining agents to the largest fractional parts (ties: earlier slot first).
    order = sorted(range(len(usable)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[: size - sum(counts)]:
        counts[i] += 1
    return [(s, n) for s, n in zip(usable, counts, strict=True) if n > 0]
