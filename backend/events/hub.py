"""In-process event hub: one monotonically increasing seq across all topics, fan-out to subscribers.

Each subscriber has a bounded queue; a subscriber that falls that far behind is dropped (its
socket is closed and the client reconnects with its last seq) rather than letting memory grow.

The hub also keeps the last REPLAY_BUFFER_SIZE messages, already serialised, so a client that
reconnects with `since=<seq>` gets exactly what it missed on its topics. When an event it wanted
was already dropped from the buffer, or its seq belongs to an earlier run of the manager (another
`epoch`), it is told to resync: refetch its snapshot over REST.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from backend.events.catalog import Event

SUBSCRIBER_QUEUE_SIZE = 1024
REPLAY_BUFFER_SIZE = 10_000
# Topics whose evictions are tracked one by one; past this, one floor for all keeps memory bounded.
EVICTED_TOPICS_MAX = 100_000
WILDCARD = "*"


def _split_topics(topics: frozenset[str]) -> tuple[frozenset[str], tuple[str, ...]]:
    """Exact topics, and the prefixes of wildcard ones ("population:*" -> "population:")."""
    exact = frozenset(t for t in topics if not t.endswith(WILDCARD))
    prefixes = tuple(sorted(t[: -len(WILDCARD)] for t in topics if t.endswith(WILDCARD)))
    return exact, prefixes


@dataclass(eq=False)
class Subscription:
    topics: frozenset[str]
    queue: asyncio.Queue[str] = field(
        default_factory=lambda: asyncio.Queue(maxsize=SUBSCRIBER_QUEUE_SIZE)
    )
    overflowed: asyncio.Event = field(default_factory=asyncio.Event)
    # What the subscriber missed before it subscribed (when it asked with `since`): the buffered
    # messages to send first, or None when the buffer cannot cover the gap (resync).
    backlog: list[str] | None = field(default_factory=list)
    _exact: frozenset[str] = field(init=False, repr=False)
    _prefixes: tuple[str, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._exact, self._prefixes = _split_topics(self.topics)

    def wants(self, topic: str) -> bool:
        return topic in self._exact or (bool(self._prefixes) and topic.startswith(self._prefixes))

    @property
    def must_resync(self) -> bool:
        return self.backlog is None


@dataclass(frozen=True, slots=True)
class _Buffered:
    seq: int
    topic: str
    message: str


class EventHub:
    def __init__(self, replay_size: int = REPLAY_BUFFER_SIZE) -> None:
        self._seq = 0
        self._subscribers: set[Subscription] = set()
        self._recent: deque[_Buffered] = deque(maxlen=replay_size)
        # The newest seq dropped from the buffer, per topic: a client is told to resync only
        # when an event of its own topics was lost, not because other topics were busy.
        self._evicted: dict[str, int] = {}
        self._evicted_floor = 0
        # Seqs start over when the manager restarts; the epoch tells a client its seq is stale.
        self.epoch = secrets.token_hex(8)
        # Subscribers dropped for falling behind, and callables told every event as it is
        # published (backend.metrics counts rounds and deploys from them).
        self.dropped = 0
        self._observers: list[Callable[[Event], None]] = []

    @property
    def seq(self) -> int:
        return self._seq

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)

    def observe(self, observer: Callable[[Event], None]) -> None:
        """Call observer(event) on every publish, in the publisher's task: it must be quick and
        must not raise."""
        self._observers.append(observer)

    @property
    def oldest_buffered_seq(self) -> int | None:
        return self._recent[0].seq if self._recent else None

    def subscribe(
        self, topics: set[str], since: int | None = None, epoch: str | None = None
    ) -> Subscription:
        """Subscribe; with `since`, the subscription's backlog holds the missed messages.

        Subscribing and reading the backlog happen without an await in between, so every event
        is either in the backlog or in the queue, never both and never neither.
        """
        sub = Subscription(frozenset(topics))
        if since is not None:
            sub.backlog = self._missed(sub, since, epoch)
        self._subscribers.add(sub)
        return sub

    def _missed(self, sub: Subscription, since: int, epoch: str | None) -> list[str] | None:
        if epoch is not None and epoch != self.epoch:
            return None
        if since > self._seq:  # from a run of the manager that counted further
            return None
        if since < self._evicted_floor:
            return None
        if any(seq > since and sub.wants(topic) for topic, seq in self._evicted.items()):
            return None
        if since == self._seq:
            return []
        # One pass over at most REPLAY_BUFFER_SIZE entries, only on a reconnect.
        return [b.message for b in self._recent if b.seq > since and sub.wants(b.topic)]

    def unsubscribe(self, sub: Subscription) -> None:
        self._subscribers.discard(sub)

    def publish(self, event: Event) -> int:
        """Send one event (backend.events.catalog) to every subscriber of its topic; returns its
        seq. Serialised once."""
        topic, payload = event.topic, event.payload()
        self._seq += 1
        message = json.dumps(
            {
                "type": event.event_type,
                "topic": topic,
                "seq": self._seq,
                "ts": datetime.now(UTC).isoformat(),
                "payload": payload,
            },
            separators=(",", ":"),
        )
        if len(self._recent) == self._recent.maxlen:
            self._evict(self._recent[0])
        self._recent.append(_Buffered(self._seq, topic, message))
        for sub in list(self._subscribers):
            if not sub.wants(topic):
                continue
            try:
                sub.queue.put_nowait(message)
            except asyncio.QueueFull:
                sub.overflowed.set()
                self._subscribers.discard(sub)
                self.dropped += 1
        for observer in self._observers:
            observer(event)
        return self._seq

    def _evict(self, dropped: _Buffered) -> None:
        self._evicted[dropped.topic] = dropped.seq
        if len(self._evicted) > EVICTED_TOPICS_MAX:
            self._evicted_floor = max(self._evicted.values())
            self._evicted.clear()
