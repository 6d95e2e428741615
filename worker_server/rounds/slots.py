"""The per-process concurrency cap: how many agents may be deciding at once.

A weighted FIFO semaphore counted in agents: a cohort of n agents takes n slots for as long as
it is in flight, and cohorts that do not fit wait their turn in arrival order (so one round's
stream of small cohorts cannot starve another round's big one). Shared by every round in the
process.
"""

from __future__ import annotations

import asyncio
from collections import deque


class AgentSlots:
    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("the concurrency cap must be >= 1")
        self.capacity = capacity
        self._free = capacity
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    @property
    def in_flight(self) -> int:
        return self.capacity - self._free

    async def acquire(self, n: int) -> None:
        if not 1 <= n <= self.capacity:
            raise ValueError(f"cannot take {n} slots of {self.capacity}")
        if not self._waiters and self._free >= n:
            self._free -= n
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append((n, waiter))
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release(n)  # granted just as we were cancelled: give it back
            else:
                try:
                    self._waiters.remove((n, waiter))
                except ValueError:  # already dropped by _wake
                    pass
                self._wake()
            raise

    def release(self, n: int) -> None:
        self._free += n
        if self._free > self.capacity:
            raise RuntimeError("released more slots than were taken")
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self._waiters[0][0] <= self._free:
            n, waiter = self._waiters.popleft()
            if waiter.done():
                continue
            self._free -= n
            waiter.set_result(None)
