"""Worker liveness, kept in memory: a heartbeat is answered without touching the store.

Each live worker (online or draining) has a pulse here: its lease, state, latest stats and the
moment it goes offline unless it beats again. The store is written in batches: every flush_s
the stats and beat times of the workers that beat since (one statement for all of them), and
at once on every change of state (the registry writes those, then tells this book). Dashboards
get one `workers.updated` event per flush carrying every worker that beat, instead of one event
per beat. The sweep turns a worker whose beats stopped offline.

The cadence grows with the fleet, as Dask's scheduler does: the manager asks for at most
max_beats_per_s heartbeats a second in all, so a large fleet beats less often and its TTL
stretches alike. A worker learns its interval from every answer, and its deadline is set from
the interval it was told, so a shrinking TTL never catches a worker still on the longer one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.cancellation import stop_if_cancelled
from backend.db.models import Worker
from backend.db.times import utc_iso, utcnow
from backend.events.catalog import WorkerStats, WorkersUpdated, WorkerUpdated
from backend.events.hub import EventHub
from backend.workers import registry
from backend.workers.history import WorkerHistory
from backend.workers.schemas import (
    STATS_FIELDS,
    HeartbeatRequest,
    WorkerOut,
)
from worker_server.worker_states import REMOVED, is_live

log = logging.getLogger(__name__)

# One `workers.updated` event carries at most this many workers (a dashboard applies it at once).
EVENT_BATCH = 500


@dataclass(frozen=True)
class Cadence:
    heartbeat_interval_s: float
    ttl_s: float


@dataclass
class _Pulse:
    lease: str
    state: str
    # Monotonic time past which the worker is offline unless it beats again.
    deadline: float
    last_beat: datetime
    # Latest reported stats (STATS_FIELDS), not yet written to the store when `dirty`.
    stats: dict
    dirty: bool = False
    # The population ids it last said it hosts (None: it has not said; ask it).
    populations: tuple[str, ...] | None = None


class Liveness:
    def __init__(
        self,
        hub: EventHub,
        *,
        heartbeat_interval_s: float,
        ttl_s: float,
        max_beats_per_s: float,
        flush_s: float,
        sweep_s: float,
        startup_grace_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        history: WorkerHistory | None = None,
    ) -> None:
        self.hub = hub
        # Every beat's stats over the last hour, for the dashboard's charts.
        self.history = history if history is not None else WorkerHistory()
        self._clock = clock
        self._base = Cadence(heartbeat_interval_s, ttl_s)
        self._max_beats_per_s = max_beats_per_s
        self._flush_s = flush_s
        self._sweep_s = sweep_s
        self._startup_grace_s = startup_grace_s
        self._pulses: dict[int, _Pulse] = {}
        # Told the seconds since a worker's previous beat, on each beat (backend.metrics).
        self.on_beat_gap: Callable[[float], None] | None = None
        # Told of each worker the sweep marks offline (backend.alerts); must not block.
        self.offline_listeners: list[Callable[[Worker], None]] = []
        # Beats that go through the store and the sweep's offline marks take turns, so a worker
        # marked offline while its beat was in flight comes back online, never the reverse.
        self._store_lock = asyncio.Lock()

    # -- what the worker plane asks -------------------------------------------------------------

    def cadence(self) -> Cadence:
        """The interval every worker is asked to beat at now, and the TTL that goes with it."""
        base = self._base
        interval = max(base.heartbeat_interval_s, len(self._pulses) / self._max_beats_per_s)
        return Cadence(interval, base.ttl_s * interval / base.heartbeat_interval_s)

    async def heartbeat(
        self, sessionmaker: async_sessionmaker, worker_id: int, beat: HeartbeatRequest
    ) -> str:
        """Record a beat; returns the worker's state. A worker this book does not hold (offline,
        unknown, another lease) goes through the store, which decides: back online, or one of
        the registry's refusals (UnknownWorker, LeaseSuperseded, WorkerRemoved)."""
        state = self._beat(worker_id, beat)
        if state is not None:
            return state
        async with self._store_lock, sessionmaker() as session:
            worker = await registry.heartbeat(session, self, worker_id, beat)
        self._beat(worker_id, beat)  # its pulse, just made by observe(), takes the report
        return worker.state

    def _beat(self, worker_id: int, beat: HeartbeatRequest) -> str | None:
        """A beat of a worker held here with this lease: in memory only."""
        pulse = self._pulses.get(worker_id)
        if pulse is None or pulse.lease != beat.lease:
            return None
        pulse.stats = beat.model_dump(include=set(STATS_FIELDS))
        self.history.beat(
            worker_id,
            cpu_percent=beat.cpu_percent,
            rss_bytes=beat.rss_bytes,
            agents=beat.agents,
            llm_requests=beat.llm_requests,
        )
        if beat.populations is not None:
            pulse.populations = tuple(beat.populations)
        now = utcnow()
        if self.on_beat_gap is not None and pulse.last_beat is not None:
            self.on_beat_gap((now - pulse.last_beat).total_seconds())
        pulse.last_beat = now
        pulse.deadline = self._clock() + self.cadence().ttl_s
        pulse.dirty = True
        return pulse.state

    def is_live(self, worker_id: int) -> bool:
        """Whether the worker beat within its TTL (what the store's last_heartbeat lags behind)."""
        pulse = self._pulses.get(worker_id)
        return pulse is not None and pulse.deadline > self._clock()

    def hosted(self, worker_id: int) -> tuple[str, ...] | None:
        """The population ids a live worker said it hosts at its last beat; None when it did
        not say (or is not live)."""
        pulse = self._pulses.get(worker_id)
        return None if pulse is None else pulse.populations

    def freshen(self, worker: WorkerOut) -> WorkerOut:
        """The worker with the stats and beat time it reported last, ahead of the next flush."""
        pulse = self._pulses.get(worker.id)
        if pulse is None or not pulse.dirty:
            return worker
        return worker.model_copy(update={**pulse.stats, "last_heartbeat": pulse.last_beat})

    # -- what the registry tells ----------------------------------------------------------------

    def observe(self, worker: Worker, *, beat: bool = False) -> None:
        """After every change of a worker row (registry): its `worker.updated` event, and its
        pulse kept, renewed (`beat`: it just registered or beat) or dropped (not live)."""
        self.hub.publish(WorkerUpdated(worker=WorkerOut.model_validate(worker)))
        pulse = self._pulses.get(worker.id)
        if not is_live(worker.state):
            if pulse is not None and pulse.lease == worker.lease:
                del self._pulses[worker.id]
            if worker.state == REMOVED:
                self.history.drop(worker.id)
            else:
                self.history.leave(worker.id)
            return
        if pulse is not None and pulse.lease == worker.lease and not beat:
            pulse.state = worker.state  # drained: the worker hears it on its next beat
            return
        self._pulses[worker.id] = pulse = self._pulse(worker, deadline=0.0)
        pulse.deadline = self._clock() + self.cadence().ttl_s  # the cadence it will be told

    def _pulse(self, worker: Worker, deadline: float) -> _Pulse:
        return _Pulse(
            lease=worker.lease,
            state=worker.state,
            deadline=deadline,
            last_beat=worker.last_heartbeat,
            stats={field: getattr(worker, field) for field in STATS_FIELDS},
        )

    async def load(self, session: AsyncSession) -> int:
        """At start-up: every live worker gets a pulse that lasts the startup grace (workers
        that lost the manager retry with a backoff of up to 10 s) or one TTL, whichever is
        longer; the store's beat times start afresh. Returns how many."""
        workers = await registry.grant_grace(session)
        deadline = self._clock() + max(self._startup_grace_s, self._base.ttl_s)
        for worker in workers:
            self._pulses[worker.id] = self._pulse(worker, deadline)
        return len(workers)

    # -- the background loop --------------------------------------------------------------------

    async def run_forever(self, sessionmaker: async_sessionmaker) -> None:
        next_flush = time.monotonic() + self._flush_s
        while True:
            try:
                if time.monotonic() >= next_flush:
                    next_flush = time.monotonic() + self._flush_s
                    async with sessionmaker() as session:
                        await self.flush(session)
                async with sessionmaker() as session:
                    await self.sweep(session)
            except Exception as exc:  # a transient DB error must not end liveness tracking
                stop_if_cancelled(exc)  # unless it stands for a cancellation
                log.exception("liveness flush or sweep failed; retrying")
            stop_if_cancelled()
            await asyncio.sleep(self._sweep_s)

    async def flush(self, session: AsyncSession) -> int:
        """Write the beats since the last flush in one statement, then tell dashboards in a few
        events. A failed write keeps them for the next flush. Returns how many."""
        self.history.prune()
        beaten = [(wid, p) for wid, p in self._pulses.items() if p.dirty]
        if not beaten:
            return 0
        rows = [
            {"id": wid, "lease": p.lease, "last_heartbeat": p.last_beat, **p.stats}
            for wid, p in beaten
        ]
        for _, pulse in beaten:
            pulse.dirty = False  # a beat during the write marks it again
        try:
            await registry.write_beats(session, rows)
        except BaseException:
            for _, pulse in beaten:
                pulse.dirty = True
            raise
        # What was written (a beat during the write is in the next flush).
        views = [
            WorkerStats(
                id=row["id"],
                **{field: row[field] for field in STATS_FIELDS},
                last_heartbeat=utc_iso(row["last_heartbeat"]),
            )
            for row in rows
        ]
        for start in range(0, len(views), EVENT_BATCH):
            self.hub.publish(WorkersUpdated(workers=views[start : start + EVENT_BATCH]))
        return len(rows)

    async def sweep(self, session: AsyncSession) -> list[Worker]:
        """Turn workers whose deadline passed offline (with their last stats and beat time)."""
        gone = []
        async with self._store_lock:
            now = self._clock()
            silent = [(wid, p) for wid, p in self._pulses.items() if p.deadline <= now]
            for worker_id, pulse in silent:
                if self._pulses.get(worker_id) is not pulse:
                    continue  # registered again meanwhile
                # From here its beats go through the store (and wait for this lock).
                del self._pulses[worker_id]
                try:
                    worker = await registry.mark_silent(
                        session,
                        worker_id,
                        pulse.lease,
                        last_heartbeat=pulse.last_beat,
                        stats=pulse.stats,
                    )
                except BaseException:
                    # Not written: it stays in the book, so the next sweep tries again.
                    self._pulses.setdefault(worker_id, pulse)
                    raise
                if worker is None:
                    continue  # removed or registered again meanwhile
                log.warning("worker %s at %s missed heartbeats: offline", worker.id, worker.address)
                self.observe(worker)
                gone.append(worker)
                for listener in self.offline_listeners:
                    listener(worker)
        return gone
