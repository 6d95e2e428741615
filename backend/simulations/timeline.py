"""A run's timeline, stored: launched, started, each round, faults, pauses, resumes, the end.

Every change of a run is already published on the hub (`simulation.updated` with its status and
reasons, `round.completed`, `simulation.fault`), by every path that makes it: the runner, the
API when no run is in flight here, a launch, a resume. So the timeline is written in one place,
by following the hub's `simulation:*` topics, rather than by an insert beside each of those
paths. Each entry is stored, then published as `timeline.added` on the run's topic (the
dashboard appends it live) and handed to `on_entry` (backend.alerts).

Entries are keyed by an increasing id and read back a page at a time (`list_entries`), so a run
of many rounds never comes back in one response.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.cancellation import stop_if_cancelled
from backend.db.models import RunEvent
from backend.db.times import utcnow
from backend.events.catalog import (
    Published,
    RoundCompleted,
    SimulationDeleted,
    SimulationFault,
    SimulationRestarted,
    SimulationUpdated,
    TimelineAdded,
    parse,
)
from backend.events.hub import EventHub, Subscription

log = logging.getLogger(__name__)

TOPICS = {"simulation:*"}
# The events that make entries (or remove them).
FOLLOWED = (
    SimulationUpdated,
    RoundCompleted,
    SimulationFault,
    SimulationRestarted,
    SimulationDeleted,
)
# Messages taken off the subscription and written in one transaction at most.
BATCH = 256
# A run's status, as the timeline last recorded it, is kept for this many runs at most (the
# store answers for the others).
STATUS_CACHE_MAX = 10_000
# The status each kind of entry leaves a run in (to tell a resume from a start after a restart).
_STATUS_OF_KIND = {
    "launched": "pending",
    "started": "running",
    "resumed": "running",
    "paused": "paused",
    "cancelled": "cancelled",
    "failed": "failed",
    "completed": "completed",
}
FINAL = ("cancelled", "failed", "completed")


@dataclass
class Entry:
    simulation_id: int
    kind: str
    message: str
    round: int | None = None
    data: dict[str, Any] = field(default_factory=dict)
    created_at: datetime = field(default_factory=utcnow)
    id: int | None = None

    def view(self) -> dict[str, Any]:
        """As the API and the `timeline.added` event show it."""
        return {
            "id": self.id,
            "simulation_id": self.simulation_id,
            "kind": self.kind,
            "round": self.round,
            "message": self.message,
            "data": self.data,
            "time": self.created_at.replace(tzinfo=UTC).isoformat(),
        }


def _event_time(event: Published) -> datetime:
    """When the hub published it (naive UTC, like every stored time)."""
    try:
        return datetime.fromisoformat(event.ts).astimezone(UTC).replace(tzinfo=None)
    except ValueError:
        return utcnow()


def round_entry(payload: RoundCompleted, at: datetime) -> Entry:
    number, rounds = payload.round, payload.rounds
    mean, duration = payload.mean, payload.duration_s
    said = f"mean {mean:.2f}" if mean is not None else "no valid answer"
    said += f", {duration:.1f} s"
    lost = payload.n_lost
    if lost:
        said += f", {lost} agents lost"
    return Entry(
        simulation_id=payload.simulation_id,
        kind="round",
        round=number,
        message=f"round {number} of {rounds} finished: {said}",
        data={"mean": mean, "duration_s": duration, "rounds": rounds, "n_lost": lost},
        created_at=at,
    )


# A round's meter fields that count its endpoint's circuit breaker changes, and their words.
_BREAKER_CHANGES = (
    ("breaker_opened", "opened"),
    ("breaker_half_opened", "went half-open"),
    ("breaker_closed", "closed"),
)


def breaker_entries(payload: RoundCompleted, at: datetime) -> list[Entry]:
    """One `fault` entry (data.cause "llm_breaker": no new kind, so no migration of the kinds'
    check) per LLM endpoint whose circuit breakers changed state in the round, counted over
    the worker processes (each change is in its worker's log), from `round.completed`'s
    meters. A paused round's changes are in its pause reason."""
    entries = []
    number = payload.round
    for meter in payload.endpoints:
        counts = {key: getattr(meter, key) for key, _ in _BREAKER_CHANGES}
        if not any(counts.values()):
            continue
        changes = ", ".join(
            f"{word} {_times(counts[key])}" for key, word in _BREAKER_CHANGES if counts[key]
        )
        skipped = meter.skipped
        said = f"{skipped} requests skipped, not sent" if skipped else "no request skipped"
        last_error = meter.last_error
        message = (
            f"round {number}: LLM endpoint {meter.base_url} (model "
            f"{meter.model!r}): circuit breaker {changes}; {said}"
            + (f"; last error: {last_error}" if last_error else "")
        )
        data = {
            "cause": "llm_breaker",
            "base_url": meter.base_url,
            "model": meter.model,
            **{key.removeprefix("breaker_"): n for key, n in counts.items()},
            "requests": meter.requests,
            "errors": meter.errors,
            "skipped": skipped,
            "last_error": last_error,
        }
        entries.append(Entry(payload.simulation_id, "fault", message, number, data, at))
    return entries


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def restart_entry(payload: SimulationRestarted, at: datetime) -> Entry:
    """A run the manager's start-up resumed: it goes on from the round after its last kept
    one."""
    played = payload.round
    return Entry(
        simulation_id=payload.simulation_id,
        kind="resumed",
        round=played or None,
        message=f"manager restarted, resumed from round {played + 1}",
        data={"cause": "manager restart", "from_round": played + 1},
        created_at=at,
    )


def status_entry(payload: SimulationUpdated, before: str | None, at: datetime) -> Entry | None:
    """The entry a `simulation.updated` makes, given the status the timeline last recorded
    (None: nothing yet); None when the status did not change (e.g. after each round)."""
    status = payload.status
    sid, played = payload.simulation_id, payload.current_round

    def entry(kind: str, message: str, **data: Any) -> Entry:
        return Entry(sid, kind, message, round=played or None, data=data, created_at=at)

    if status == before:
        return None
    if status == "pending":
        return entry("launched", f"launched: {payload.rounds} rounds")
    if status == "running":
        if before in ("paused", "failed"):
            return entry("resumed", f"resumed after round {played}")
        return entry("started", "started" if not played else f"started after round {played}")
    if status == "paused":
        reason = payload.pause_reason or "no reason given"
        return entry("paused", f"paused: {reason}", reason=reason)
    if status == "cancelled":
        reason = payload.cancel_reason
        said = f"cancelled: {reason}" if reason else "cancelled (no reason given)"
        return entry("cancelled", said, reason=reason)
    if status == "failed":
        error = payload.error or "unknown error"
        return entry("failed", f"failed: {error}", error=error)
    if status == "completed":
        stop = payload.stop_reason
        said = f"finished after {played} rounds" + (f" ({stop})" if stop else "")
        return entry("completed", said, stop_reason=stop)
    return None


# --- the store -------------------------------------------------------------------------------


async def add_entries(session: AsyncSession, entries: list[Entry]) -> None:
    rows = [
        RunEvent(
            simulation_id=e.simulation_id,
            kind=e.kind,
            round=e.round,
            message=e.message,
            data=e.data,
            created_at=e.created_at,
        )
        for e in entries
    ]
    session.add_all(rows)
    await session.flush()
    for entry, row in zip(entries, rows, strict=True):
        entry.id = row.id
    await session.commit()


async def list_entries(
    session: AsyncSession, simulation_id: int, *, after: int | None, limit: int
) -> tuple[list[Entry], int | None]:
    """One page, oldest first, and the id to ask after for the next (None: no more yet)."""
    stmt = select(RunEvent).where(RunEvent.simulation_id == simulation_id)
    if after is not None:
        stmt = stmt.where(RunEvent.id > after)
    rows = list(await session.scalars(stmt.order_by(RunEvent.id).limit(limit + 1)))
    more = len(rows) > limit
    entries = [
        Entry(r.simulation_id, r.kind, r.message, r.round, dict(r.data or {}), r.created_at, r.id)
        for r in rows[:limit]
    ]
    return entries, (entries[-1].id if more else None)


async def delete_entries(session: AsyncSession, simulation_id: int) -> None:
    """In the caller's transaction (backend.simulations.store.delete_simulation commits)."""
    await session.execute(delete(RunEvent).where(RunEvent.simulation_id == simulation_id))


async def last_status(session: AsyncSession, simulation_id: int) -> str | None:
    kind = await session.scalar(
        select(RunEvent.kind)
        .where(RunEvent.simulation_id == simulation_id, RunEvent.kind.in_(_STATUS_OF_KIND))
        .order_by(RunEvent.id.desc())
        .limit(1)
    )
    return _STATUS_OF_KIND.get(kind) if kind else None


# --- following the hub -----------------------------------------------------------------------


class RunTimeline:
    """Follows the hub and writes every run's entries (app lifespan: `run_forever`)."""

    def __init__(
        self,
        hub: EventHub,
        sessionmaker: async_sessionmaker,
        on_entry: Iterable[Callable[[Entry], None]] = (),
    ) -> None:
        self.hub = hub
        self.sessionmaker = sessionmaker
        self.on_entry = list(on_entry)
        self._status: dict[int, str | None] = {}
        self._last_seq = 0
        self._subscription: Subscription | None = None

    def subscribe(self) -> None:
        """Subscribe now (before the app serves anything), so no event is missed."""
        if self._subscription is None:
            self._subscription = self.hub.subscribe(TOPICS)
            self._last_seq = self.hub.seq

    async def run_forever(self) -> None:
        self.subscribe()
        assert self._subscription is not None
        try:
            while True:
                sub = self._subscription
                messages = [await sub.queue.get()]
                while len(messages) < BATCH and not sub.queue.empty():
                    messages.append(sub.queue.get_nowait())
                await self.handle(self._parsed(messages))
                stop_if_cancelled()  # handle() logs store errors, a cancellation among them
                if sub.overflowed.is_set() and sub.queue.empty():
                    await self._catch_up()
        finally:
            if self._subscription is not None:
                self.hub.unsubscribe(self._subscription)

    async def _catch_up(self) -> None:
        """The hub dropped us (we fell a queue behind): what we missed comes from its replay
        buffer; what it no longer holds is lost to the timeline, and said so in the log."""
        sub = self.hub.subscribe(TOPICS, since=self._last_seq, epoch=self.hub.epoch)
        self._subscription = sub
        if sub.must_resync:
            log.warning(
                "run timeline: events after seq %d were lost (hub overflow)", self._last_seq
            )
            return
        backlog, sub.backlog = sub.backlog or [], []
        for start in range(0, len(backlog), BATCH):
            await self.handle(self._parsed(backlog[start : start + BATCH]))

    def _parsed(self, messages: list[str]) -> list[Published]:
        """The followed events among the hub's messages; every message counts as seen, so a
        catch-up asks only for what came after it."""
        events = []
        for message in messages:
            raw = json.loads(message)
            self._last_seq = max(self._last_seq, raw.get("seq", 0))
            event = parse(raw, FOLLOWED)
            if event is not None:
                events.append(event)
        return events

    async def handle(self, events: list[Published]) -> list[Entry]:
        """Turn events into stored entries; returns them. A failed write is logged and its
        entries dropped: the run goes on whatever happens to its timeline."""
        try:
            async with self.sessionmaker() as session:
                entries = await self._entries(session, events)
                if entries:
                    await add_entries(session, entries)
        except Exception as exc:
            stop_if_cancelled(exc)  # a cancelled write is no failed one: stop, quietly
            log.exception("run timeline: %d events not recorded", len(events))
            return []
        for entry in entries:
            self.hub.publish(TimelineAdded(**entry.view()))
            for hook in self.on_entry:
                try:
                    hook(entry)
                except Exception:
                    log.exception("run timeline: a listener failed on a %s entry", entry.kind)
        return entries

    async def _entries(self, session: AsyncSession, events: list[Published]) -> list[Entry]:
        entries: list[Entry] = []
        for event in events:
            payload, at = event.payload, _event_time(event)
            if isinstance(payload, SimulationDeleted):
                sid = payload.simulation_id
                await delete_entries(session, sid)
                await session.commit()
                entries = [e for e in entries if e.simulation_id != sid]
                self._status.pop(sid, None)
            elif isinstance(payload, RoundCompleted):
                entries.append(round_entry(payload, at))
                entries.extend(breaker_entries(payload, at))
            elif isinstance(payload, SimulationRestarted):
                entries.append(restart_entry(payload, at))
                self._remember(payload.simulation_id, "running")
            elif isinstance(payload, SimulationFault):
                entries.append(
                    Entry(payload.simulation_id, "fault", payload.message, payload.round, {}, at)
                )
            elif isinstance(payload, SimulationUpdated):
                before = await self._before(session, payload.simulation_id)
                entry = status_entry(payload, before, at)
                if entry is not None:
                    entries.append(entry)
                    self._remember(payload.simulation_id, payload.status)
        return entries

    async def _before(self, session: AsyncSession, simulation_id: int) -> str | None:
        if simulation_id not in self._status:
            self._remember(simulation_id, await last_status(session, simulation_id))
        return self._status[simulation_id]

    def _remember(self, simulation_id: int, status: str | None) -> None:
        if len(self._status) >= STATUS_CACHE_MAX and simulation_id not in self._status:
            self._status.pop(next(iter(self._status)))  # the oldest: read again when needed
        self._status[simulation_id] = status
