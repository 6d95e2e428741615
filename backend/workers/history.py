"""Each worker's recent load over time (the last hour), kept by the manager from heartbeats.

A worker's history is a ring of fixed-width buckets (bucket_s, 10 s by default) covering the
last window_s (an hour): a bucket holds the mean CPU of the beats that fell in it, the last RSS
and agent count, and the LLM requests per second derived from the worker's cumulative
`llm_requests` counter (the requests counted between two beats over the seconds between them,
so the rate is right whatever the heartbeat cadence; a counter that went down means the process
restarted and counts from 0 again).

Bounded and O(1) per beat: a beat updates the newest bucket or starts the next one, overwriting
the oldest once the ring is full. A bucket is only made when a beat falls in it, so a large
fleet, which liveness asks to beat less often, holds fewer buckets per worker: in all at most
max_heartbeats_per_s * window_s buckets (216,000 at the defaults, 56 bytes each in one flat
array per worker), however many workers there are. Kept in memory only: a restarted manager
starts its history afresh.

The cluster's series is the sum of the workers' series, bucket by bucket: the same bucket
boundaries (epoch // bucket_s on the manager's clock), and in each bucket the sum of what each
worker's own point says (its mean CPU, last RSS and agents, its request rate), never a snapshot
of the last beat. A live worker that did not beat in a bucket (a large fleet beats less often than
once a bucket) counts with its previous bucket's values until it beats again; one that went
offline during a bucket still counts in that bucket, not after. The sums are running sums swapped
at each beat (a worker's share out, its new share in), so they cost O(1) too, and written into a
ring of their own: reading them never walks every worker's history.
"""

from __future__ import annotations

import math
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass

# A history read returns at most this many points: a small bucket covers a shorter window.
MAX_POINTS = 3600


@dataclass(frozen=True)
class WorkerPoint:
    t: float  # the bucket's start, seconds since the Unix epoch
    cpu_percent: float
    rss_bytes: int
    agents: int
    # None: the worker does not report its LLM request counter (an older worker), or this bucket
    # has no interval to measure over yet (its first beat).
    llm_requests_per_s: float | None


@dataclass(frozen=True)
class ClusterPoint:
    t: float
    workers: int  # workers counted in the bucket: live ones, and those that left during it
    cpu_percent: float
    rss_bytes: int
    agents: int
    llm_requests_per_s: float


class _Ring:
    """Buckets of `width` float fields in one flat array, newest last; grows until `capacity`
    buckets, then overwrites the oldest. Field 0 is the bucket's number (epoch // bucket_s)."""

    __slots__ = ("width", "capacity", "data", "newest")

    def __init__(self, width: int, capacity: int) -> None:
        self.width = width
        self.capacity = capacity
        self.data = array("d")
        self.newest = -1  # index of the newest bucket, -1 when empty

    def __len__(self) -> int:
        return len(self.data) // self.width

    def newest_bucket(self) -> float | None:
        return None if self.newest < 0 else self.data[self.newest * self.width]

    def slot(self, bucket: int) -> int:
        """The offset of `bucket`'s fields: the newest one, or a new bucket (zeroed) after it."""
        width = self.width
        # The newest bucket also takes a beat from before it (the wall clock stepped back).
        if self.newest >= 0 and self.data[self.newest * width] >= bucket:
            return self.newest * width
        if len(self) < self.capacity:
            self.data.extend([0.0] * width)
            self.newest = len(self) - 1
        else:
            self.newest = (self.newest + 1) % self.capacity
        offset = self.newest * width
        self.data[offset : offset + width] = array("d", [bucket] + [0.0] * (width - 1))
        return offset

    def rows(self, since_bucket: float) -> list[array]:
        """The buckets numbered above since_bucket, oldest first."""
        n, width = len(self), self.width
        if n == 0:
            return []
        oldest = (self.newest + 1) % n if n == self.capacity else 0
        rows = []
        for k in range(n):
            offset = ((oldest + k) % n) * width
            if self.data[offset] > since_bucket:
                rows.append(self.data[offset : offset + width])
        return rows


# Worker bucket fields.
_W_BUCKET, _W_BEATS, _W_CPU, _W_RSS, _W_AGENTS, _W_REQUESTS, _W_SECONDS = range(7)
# Cluster bucket fields.
_C_BUCKET, _C_WORKERS, _C_CPU, _C_RSS, _C_AGENTS, _C_RATE = range(6)


# A worker's share of a cluster bucket: its point's cpu, rss, agents and requests/s.
Share = tuple[float, float, float, float]


class _Worker:
    """One worker's ring, plus what the next beat needs: its counter and time at the last beat,
    and its share of the cluster totals, its newest point's values (None: not counted, not live)."""

    __slots__ = ("ring", "last_count", "last_t", "levels")

    def __init__(self, capacity: int) -> None:
        self.ring = _Ring(7, capacity)
        self.last_count: int | None = None
        self.last_t = 0.0
        self.levels: Share | None = None


class WorkerHistory:
    def __init__(
        self,
        *,
        bucket_s: float = 10.0,
        window_s: float = 3600.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not (bucket_s > 0 and window_s > 0):
            raise ValueError("bucket_s and window_s must be > 0")
        self.bucket_s = bucket_s
        self.points = max(1, min(MAX_POINTS, math.ceil(window_s / bucket_s)))
        self._clock = clock
        self._workers: dict[int, _Worker] = {}
        self._cluster = _Ring(6, self.points)
        # Running sums of the live workers' shares: cpu, rss, agents, requests/s.
        self._totals = [0.0, 0.0, 0.0, 0.0]
        self._members = 0
        # The shares of workers that left during the newest cluster bucket: they count in it.
        self._left_bucket: float | None = None
        self._left: dict[int, Share] = {}
        self._left_totals = [0.0, 0.0, 0.0, 0.0]

    @property
    def window_s(self) -> float:
        return self.points * self.bucket_s

    # -- what liveness tells --------------------------------------------------------------------

    def beat(
        self,
        worker_id: int,
        *,
        cpu_percent: float,
        rss_bytes: int,
        agents: int,
        llm_requests: int | None,
    ) -> None:
        """Record one heartbeat's report."""
        now = self._clock()
        bucket = int(now // self.bucket_s)
        worker = self._workers.get(worker_id)
        if worker is None:
            worker = self._workers[worker_id] = _Worker(self.points)
        rate = self._rate(worker, now, llm_requests)
        ring = worker.ring
        at = ring.slot(bucket)
        data = ring.data
        beats = data[at + _W_BEATS] + 1
        data[at + _W_BEATS] = beats
        data[at + _W_CPU] += (cpu_percent - data[at + _W_CPU]) / beats  # running mean
        data[at + _W_RSS] = rss_bytes
        data[at + _W_AGENTS] = agents
        if rate is not None:
            requests, seconds = rate
            data[at + _W_REQUESTS] += requests
            data[at + _W_SECONDS] += seconds
        # Its share of the cluster's bucket is its own point, as the worker's series shows it.
        seconds = data[at + _W_SECONDS]
        share = (
            data[at + _W_CPU],
            data[at + _W_RSS],
            data[at + _W_AGENTS],
            data[at + _W_REQUESTS] / seconds if seconds > 0 else 0.0,
        )
        self._set_levels(worker_id, worker, share, int(data[at + _W_BUCKET]))

    def leave(self, worker_id: int) -> None:
        """The worker is no longer live (offline, removed): it leaves the cluster totals after
        this bucket, and its next beat starts a new interval (no rate measured across the gap)."""
        worker = self._workers.get(worker_id)
        if worker is None:
            return
        worker.last_count = None
        if worker.levels is None:
            return
        bucket = int(self._clock() // self.bucket_s)
        newest = self._open(bucket)
        # It beat in this bucket: its point there keeps counting in the cluster's bucket.
        if worker.ring.newest_bucket() == newest:
            self._left[worker_id] = worker.levels
            for i, level in enumerate(worker.levels):
                self._left_totals[i] += level
        self._set_levels(worker_id, worker, None, bucket)

    def drop(self, worker_id: int) -> None:
        """Forget the worker altogether (it was removed): its series is gone, so it no longer
        counts in the cluster's newest bucket either."""
        self.leave(worker_id)
        self._workers.pop(worker_id, None)
        left = self._left.pop(worker_id, None)
        if left is not None:
            for i, level in enumerate(left):
                self._left_totals[i] -= level
            self._write()

    def prune(self) -> int:
        """Forget workers with no bucket in the window, and sum the totals afresh (running sums
        of floats drift). O(workers); liveness calls it at each flush. Returns how many went."""
        oldest = int(self._clock() // self.bucket_s) - self.points
        stale = [
            wid
            for wid, w in self._workers.items()
            if w.levels is None and (w.ring.newest_bucket() or 0) <= oldest
        ]
        for wid in stale:
            del self._workers[wid]
        totals = [0.0, 0.0, 0.0, 0.0]
        members = 0
        for worker in self._workers.values():
            if worker.levels is not None:
                members += 1
                for i, level in enumerate(worker.levels):
                    totals[i] += level
        self._totals, self._members = totals, members
        return len(stale)

    def __len__(self) -> int:
        return len(self._workers)

    def __contains__(self, worker_id: int) -> bool:
        return worker_id in self._workers

    # -- what the API reads ---------------------------------------------------------------------

    def worker(self, worker_id: int) -> list[WorkerPoint]:
        """The worker's points in the window, oldest first (empty when it never beat here)."""
        worker = self._workers.get(worker_id)
        if worker is None:
            return []
        return [self._worker_point(row) for row in worker.ring.rows(self._since())]

    def cluster(self) -> list[ClusterPoint]:
        """The cluster totals per bucket in the window, oldest first: in each bucket the sum of
        the workers' points in it (see the module's docstring for the silent and the gone)."""
        return [
            ClusterPoint(
                t=row[_C_BUCKET] * self.bucket_s,
                workers=int(row[_C_WORKERS]),
                cpu_percent=max(0.0, row[_C_CPU]),
                rss_bytes=max(0, round(row[_C_RSS])),
                agents=max(0, round(row[_C_AGENTS])),
                llm_requests_per_s=max(0.0, row[_C_RATE]),
            )
            for row in self._cluster.rows(self._since())
        ]

    # -- inside ---------------------------------------------------------------------------------

    def _since(self) -> int:
        return int(self._clock() // self.bucket_s) - self.points

    @staticmethod
    def _rate(worker: _Worker, now: float, count: int | None) -> tuple[float, float] | None:
        """(requests, seconds) since the worker's last beat, or None when there is nothing to
        measure (no counter, or no previous beat to measure from)."""
        last, last_t = worker.last_count, worker.last_t
        worker.last_count, worker.last_t = count, now
        if count is None or last is None or now <= last_t:
            return None
        # A counter that went down belongs to a restarted process, which counted from 0.
        requests = count - last if count >= last else count
        return float(requests), now - last_t

    def _worker_point(self, row: array) -> WorkerPoint:
        seconds = row[_W_SECONDS]
        return WorkerPoint(
            t=row[_W_BUCKET] * self.bucket_s,
            cpu_percent=row[_W_CPU],
            rss_bytes=int(row[_W_RSS]),
            agents=int(row[_W_AGENTS]),
            llm_requests_per_s=row[_W_REQUESTS] / seconds if seconds > 0 else None,
        )

    def _open(self, bucket: int) -> float:
        """The cluster's bucket a change at `bucket` lands in (a new one, or the newest when the
        clock stepped back); a new bucket starts with no departed workers."""
        at = self._cluster.slot(bucket)
        newest = self._cluster.data[at]
        if newest != self._left_bucket:
            self._left_bucket = newest
            self._left.clear()
            self._left_totals = [0.0, 0.0, 0.0, 0.0]
        return newest

    def _set_levels(
        self, worker_id: int, worker: _Worker, levels: Share | None, bucket: int
    ) -> None:
        """Swap the worker's share of the cluster totals, and write the totals into `bucket`."""
        self._open(bucket)
        totals = self._totals
        if worker.levels is not None:
            self._members -= 1
            for i, level in enumerate(worker.levels):
                totals[i] -= level
        if levels is not None:
            self._members += 1
            for i, level in enumerate(levels):
                totals[i] += level
            # Back in the bucket it left: its point counts once, with what it reports now.
            left = self._left.pop(worker_id, None)
            if left is not None:
                for i, level in enumerate(left):
                    self._left_totals[i] -= level
        worker.levels = levels
        self._write()

    def _write(self) -> None:
        """The totals, and the shares of those that left during it, into the newest bucket."""
        at = self._cluster.newest * self._cluster.width
        data = self._cluster.data
        totals, left_totals = self._totals, self._left_totals
        data[at + _C_WORKERS] = self._members + len(self._left)
        data[at + _C_CPU] = totals[0] + left_totals[0]
        data[at + _C_RSS] = totals[1] + left_totals[1]
        data[at + _C_AGENTS] = totals[2] + left_totals[2]
        data[at + _C_RATE] = totals[3] + left_totals[3]
