"""A run's timeline, stored: launched, started, each round, faults, pauses, resumes, the end.

Each entry is written in the same transaction as the change it records (an outbox): the
status change (`store.set_status`, `reactivate`, `create_simulation`), the kept round
(`store.save_round`), a resume at manager start-up, a fault (`record_fault`). So a run's
timeline is whole whatever the event hub drops, and an entry exists exactly when its change
was committed. `RunTimeline` then announces the entries not announced yet: `timeline.added` on
the run's topic (the dashboard appends it live) and `on_entry` (backend.alerts); after a
manager restart it announces what the last one committed but did not announce.

Entries are keyed by an increasing id and read back a page at a time (`list_entries`), so a run
of many rounds never comes back in one response.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.cancellation import stop_if_cancelled
from backend.db.models import RunEvent, Simulation
from backend.db.times import utcnow
from backend.events.catalog import TimelineAdded
from backend.events.hub import EventHub, Subscription
from backend.lifecycles import simulation as lifecycle

log = logging.getLogger(__name__)

# Every change of a run is published on these topics after its commit: the announcer's cue to
# look for new entries (it also looks every POLL_S, so a dropped cue costs a delay, not an entry).
TOPICS = {"simulation:*"}
POLL_S = 1.0
# Entries announced per read at most.
BATCH = 256
# A fault that could not be written is tried again after this, doubling up to the maximum.
FAULT_RETRY_S = 0.5
FAULT_RETRY_MAX_S = 10.0


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


class KeptRound(Protocol):
    """What a round's entries read of a kept round (backend.simulations.outcome.RoundOutcome)."""

    round: int
    mean: float | None
    duration_s: float
    n_lost: int
    endpoints: list[dict]


def round_entries(simulation_id: int, rounds: int, kept: KeptRound, at: datetime) -> list[Entry]:
    """The round's entry, then one per LLM endpoint whose circuit breakers changed state."""
    return [round_entry(simulation_id, rounds, kept, at), *breaker_entries(simulation_id, kept, at)]


def round_entry(simulation_id: int, rounds: int, kept: KeptRound, at: datetime) -> Entry:
    number, mean, duration = kept.round, kept.mean, kept.duration_s
    said = f"mean {mean:.2f}" if mean is not None else "no valid answer"
    said += f", {duration:.1f} s"
    lost = kept.n_lost
    if lost:
        said += f", {lost} agents lost"
    return Entry(
        simulation_id=simulation_id,
        kind=lifecycle.ROUND,
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


def breaker_entries(simulation_id: int, kept: KeptRound, at: datetime) -> list[Entry]:
    """One `fault` entry (data.cause "llm_breaker": no new kind, so no migration of the kinds'
    check) per LLM endpoint whose circuit breakers changed state in the round, counted over
    the worker processes (each change is in its worker's log), from the round's meters. A
    paused round's changes are in its pause reason."""
    entries = []
    number = kept.round
    for meter in kept.endpoints:
        counts = {key: int(meter.get(key) or 0) for key, _ in _BREAKER_CHANGES}
        if not any(counts.values()):
            continue
        changes = ", ".join(
            f"{word} {_times(counts[key])}" for key, word in _BREAKER_CHANGES if counts[key]
        )
        skipped = meter.get("skipped", 0)
        said = f"{skipped} requests skipped, not sent" if skipped else "no request skipped"
        last_error = meter.get("last_error")
        message = (
            f"round {number}: LLM endpoint {meter.get('base_url')} (model "
            f"{meter.get('model')!r}): circuit breaker {changes}; {said}"
            + (f"; last error: {last_error}" if last_error else "")
        )
        data = {
            "cause": "llm_breaker",
            "base_url": meter.get("base_url"),
            "model": meter.get("model"),
            **{key.removeprefix("breaker_"): n for key, n in counts.items()},
            "requests": meter.get("requests", 0),
            "errors": meter.get("errors", 0),
            "skipped": skipped,
            "last_error": last_error,
        }
        entries.append(Entry(simulation_id, lifecycle.FAULT, message, number, data, at))
    return entries


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def restart_entry(simulation_id: int, played: int, at: datetime) -> Entry:
    """A run the manager's start-up resumed: it goes on from the round after its last kept
    one."""
    return Entry(
        simulation_id=simulation_id,
        kind=lifecycle.RESUMED,
        round=played or None,
        message=f"manager restarted, resumed from round {played + 1}",
        data={"cause": "manager restart", "from_round": played + 1},
        created_at=at,
    )


def status_entry(run: Simulation, before: str | None, at: datetime) -> Entry | None:
    """The entry a run's new status makes, given the status its timeline last recorded (None:
    nothing yet); None when the status did not change (e.g. after each round)."""
    status = run.status
    sid, played = run.id, run.current_round

    def entry(kind: str, message: str, **data: Any) -> Entry:
        return Entry(sid, kind, message, round=played or None, data=data, created_at=at)

    if status == before:
        return None
    if status == lifecycle.PENDING:
        return entry(lifecycle.LAUNCHED, f"launched: {run.rounds} rounds")
    if status == lifecycle.RUNNING:
        if before in lifecycle.RESUMABLE:
            return entry(lifecycle.RESUMED, f"resumed after round {played}")
        started = lifecycle.STARTED
        return entry(started, started if not played else f"started after round {played}")
    # A run that stops writes the entry named after its status.
    if status == lifecycle.PAUSED:
        reason = run.pause_reason or "no reason given"
        return entry(status, f"paused: {reason}", reason=reason)
    if status == lifecycle.CANCELLED:
        reason = run.cancel_reason
        said = f"cancelled: {reason}" if reason else "cancelled (no reason given)"
        return entry(status, said, reason=reason)
    if status == lifecycle.FAILED:
        error = run.error or "unknown error"
        return entry(status, f"failed: {error}", error=error)
    if status == lifecycle.COMPLETED:
        stop = run.stop_reason
        said = f"finished after {played} rounds" + (f" ({stop})" if stop else "")
        return entry(status, said, stop_reason=stop)
    return None


# --- the store -------------------------------------------------------------------------------


def add_entries(session: AsyncSession, entries: Iterable[Entry]) -> None:
    """In the caller's transaction, with the change they record: unannounced until
    `RunTimeline` announces them."""
    session.add_all(
        RunEvent(
            simulation_id=e.simulation_id,
            kind=e.kind,
            round=e.round,
            message=e.message,
            data=e.data,
            created_at=e.created_at,
            published=False,
        )
        for e in entries
    )


async def record_status(session: AsyncSession, run: Simulation) -> None:
    """The entry of `run`'s status, if it changed since the timeline's last, in the caller's
    transaction. Called after the UPDATE that changed it: the run's row is locked, so no other
    status change of the run comes between the read and the write."""
    entry = status_entry(run, await last_status(session, run.id), utcnow())
    if entry is not None:
        add_entries(session, [entry])


class FaultLog:
    """A run's faults (a worker lost, the store unreachable): each written in its own
    transaction as it happens, in order. A fault told while the store does not answer (that
    is one of them) is written once it answers again, retried with backoff."""

    def __init__(self, sessionmaker: async_sessionmaker) -> None:
        self.sessionmaker = sessionmaker
        self._waiting: list[Entry] = []
        self._writer: asyncio.Task | None = None

    def add(self, simulation_id: int, round_number: int, message: str) -> None:
        self._waiting.append(Entry(simulation_id, lifecycle.FAULT, message, round_number, {}))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write())

    async def _write(self) -> None:
        backoff = FAULT_RETRY_S
        while self._waiting:
            batch = list(self._waiting)
            try:
                async with self.sessionmaker() as session:
                    add_entries(session, batch)
                    await session.commit()
            except Exception as exc:
                stop_if_cancelled(exc)
                log.warning("run timeline: %d faults not written yet (%s)", len(batch), exc)
                await asyncio.sleep(backoff)
                backoff = min(2 * backoff, FAULT_RETRY_MAX_S)
                continue
            del self._waiting[: len(batch)]


def _entry(row: RunEvent) -> Entry:
    return Entry(
        row.simulation_id, row.kind, row.message, row.round, dict(row.data or {}),
        row.created_at, row.id,
    )  # fmt: skip


async def list_entries(
    session: AsyncSession, simulation_id: int, *, after: int | None, limit: int
) -> tuple[list[Entry], int | None]:
    """One page, oldest first, and the id to ask after for the next (None: no more yet)."""
    stmt = select(RunEvent).where(RunEvent.simulation_id == simulation_id)
    if after is not None:
        stmt = stmt.where(RunEvent.id > after)
    rows = list(await session.scalars(stmt.order_by(RunEvent.id).limit(limit + 1)))
    more = len(rows) > limit
    entries = [_entry(r) for r in rows[:limit]]
    return entries, (entries[-1].id if more else None)


async def delete_entries(session: AsyncSession, simulation_id: int) -> None:
    """In the caller's transaction (backend.simulations.store.delete_simulation commits)."""
    await session.execute(delete(RunEvent).where(RunEvent.simulation_id == simulation_id))


async def last_status(session: AsyncSession, simulation_id: int) -> str | None:
    kind = await session.scalar(
        select(RunEvent.kind)
        .where(RunEvent.simulation_id == simulation_id, RunEvent.kind.in_(lifecycle.STATUS_OF_KIND))
        .order_by(RunEvent.id.desc())
        .limit(1)
    )
    return lifecycle.STATUS_OF_KIND.get(kind) if kind else None


# --- announcing ------------------------------------------------------------------------------


class RunTimeline:
    """Announces stored entries not announced yet (app lifespan: `run_forever`), in id order,
    at least once: an entry is marked announced after it went out, so a manager stopped in
    between announces it again at its next start."""

    def __init__(
        self,
        hub: EventHub,
        sessionmaker: async_sessionmaker,
        on_entry: Iterable[Callable[[Entry], None]] = (),
        poll_s: float = POLL_S,
    ) -> None:
        self.hub = hub
        self.sessionmaker = sessionmaker
        self.on_entry = list(on_entry)
        self.poll_s = poll_s
        self._subscription: Subscription | None = None

    def subscribe(self) -> None:
        """Follow the runs' topics now (before the app serves anything), for the cues."""
        if self._subscription is None:
            self._subscription = self.hub.subscribe(TOPICS)

    async def run_forever(self) -> None:
        self.subscribe()
        try:
            while True:
                while len(await self.announce()) == BATCH:
                    pass  # a backlog (a restart after many unannounced entries): go on
                await self._cue()
        finally:
            if self._subscription is not None:
                self.hub.unsubscribe(self._subscription)
                self._subscription = None

    async def _cue(self) -> None:
        """Until a run's event arrives (its change is committed) or POLL_S passes."""
        sub = self._subscription
        assert sub is not None
        if sub.overflowed.is_set():  # dropped by the hub: only the cues are lost
            self.hub.unsubscribe(sub)
            self._subscription = None
            self.subscribe()
            return
        try:
            await asyncio.wait_for(sub.queue.get(), self.poll_s)
        except TimeoutError:
            return
        while not sub.queue.empty():  # one look answers every cue waiting
            sub.queue.get_nowait()

    async def announce(self) -> list[Entry]:
        """Announce the oldest unannounced entries (BATCH at most); returns them. A failed read
        is logged and tried again at the next cue: the entries stay in the store."""
        try:
            async with self.sessionmaker() as session:
                rows = await session.scalars(
                    select(RunEvent)
                    .where(RunEvent.published.is_(False))
                    .order_by(RunEvent.id)
                    .limit(BATCH)
                )
                entries = [_entry(r) for r in rows]
                for entry in entries:
                    self._announce(entry)
                if entries:
                    ids = [e.id for e in entries]
                    await session.execute(
                        update(RunEvent).where(RunEvent.id.in_(ids)).values(published=True)
                    )
                    await session.commit()
        except Exception as exc:
            stop_if_cancelled(exc)  # a cancelled read is no failed one: stop, quietly
            log.exception("run timeline: could not announce new entries; trying again")
            return []
        return entries

    def _announce(self, entry: Entry) -> None:
        self.hub.publish(TimelineAdded(**entry.view()))
        for hook in self.on_entry:
            try:
                hook(entry)
            except Exception:
                log.exception("run timeline: a listener failed on a %s entry", entry.kind)
