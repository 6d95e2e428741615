"""In-process event hub: one monotonically increasing seq across all topics, fan-out to subscribers.

Each subscriber has a bounded queue; a subscriber that falls that far behind is dropped (its
socket is closed and the client reconnects and refetches) rather than letting memory grow.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

SUBSCRIBER_QUEUE_SIZE = 1024


@dataclass(eq=False)
class Subscription:
    topics: frozenset[str]
    queue: asyncio.Queue[str] = field(
        default_factory=lambda: asyncio.Queue(maxsize=SUBSCRIBER_QUEUE_SIZE)
    )
    overflowed: asyncio.Event = field(default_factory=asyncio.Event)

    def wants(self, topic: str) -> bool:
        return topic in self.topics


class EventHub:
    def __init__(self) -> None:
        self._seq = 0
        self._subscribers: set[Subscription] = set()

    @property
    def seq(self) -> int:
        return self._seq

    def subscribe(self, topics: set[str]) -> Subscription:
        sub = Subscription(frozenset(topics))
        self._subscribers.add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        self._subscribers.discard(sub)

    def publish(self, topic: str, type_: str, payload: dict[str, Any]) -> int:
        """Send one event to every subscriber of topic; returns its seq. Serialised once."""
        self._seq += 1
        message = json.dumps(
            {
                "type": type_,
                "topic": topic,
                "seq": self._seq,
                "ts": datetime.now(UTC).isoformat(),
                "payload": payload,
            },
            separators=(",", ":"),
        )
        for sub in list(self._subscribers):
            if not sub.wants(topic):
                continue
            try:
                sub.queue.put_nowait(message)
            except asyncio.QueueFull:
                sub.overflowed.set()
                self._subscribers.discard(sub)
        return self._seq
