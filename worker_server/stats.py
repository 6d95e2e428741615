"""What a worker process reports about its load: process stats and a capacity estimate."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

import psutil


@dataclass
class LoadCounters:
    """Counters the agent runtime fills; heartbeats report them."""

    agents: int = 0
    inflight_llm_calls: int = 0
    # Every LLM request sent since the process started (heartbeats report it; never reset).
    llm_requests: int = 0

    def set_agents(self, total: int) -> None:
        self.agents = total


@dataclass
class LoopProgress:
    """How the process's main event loop moves: it ticks this every LOOP_TICK_S while it runs,
    and the heartbeat thread (worker_server.plane) reads how long ago it last did. Plain
    numbers, written by one thread and read by another."""

    ticks: int = 0
    last_tick: float = field(default_factory=time.monotonic)

    def tick(self) -> None:
        self.last_tick = time.monotonic()
        self.ticks += 1

    def lag_s(self) -> float:
        """Seconds since the loop last ticked (0 while it keeps up)."""
        return max(0.0, time.monotonic() - self.last_tick)


@dataclass(frozen=True)
class ProcessStats:
    pid: int
    cpu_percent: float
    rss_bytes: int


class ProcessSampler:
    """Samples this process's cpu and rss.

    psutil's cpu_percent() measures since its previous call, so heartbeats and GetInfo would
    shorten each other's window; a short cache keeps the figure meaningful for both. Heartbeats
    sample from the plane's thread and GetInfo from the main loop: a lock keeps them apart.
    """

    def __init__(self, pid: int | None = None, *, min_interval_s: float = 0.5) -> None:
        self._process = psutil.Process(pid or os.getpid())
        self._min_interval_s = min_interval_s
        self._process.cpu_percent(None)  # primes the counter: the first call always says 0.0
        self._last: ProcessStats | None = None
        self._last_at = 0.0
        self._lock = threading.Lock()

    def sample(self) -> ProcessStats:
        with self._lock:
            now = time.monotonic()
            if self._last is None or now - self._last_at >= self._min_interval_s:
                self._last = ProcessStats(
                    pid=self._process.pid,
                    cpu_percent=max(0.0, float(self._process.cpu_percent(None))),
                    rss_bytes=int(self._process.memory_info().rss),
                )
                self._last_at = now
            return self._last


def estimate_capacity(available_bytes: int, procs: int, bytes_per_agent: int) -> int:
    """Agents one process can hold: its share of the node's free memory over the per-agent budget."""
    if procs < 1 or bytes_per_agent < 1:
        raise ValueError("procs and bytes_per_agent must be >= 1")
    return max(0, available_bytes) // procs // bytes_per_agent


def available_memory_bytes() -> int:
    return int(psutil.virtual_memory().available)
