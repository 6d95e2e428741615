"""What a caller (a round, a part of a cohort) asked of each LLM endpoint: a few counters per
(base_url, model), never anything per agent.

- requests: attempts sent, retries included;
- errors: attempts that got no usable completion (connection error, timeout, any non-200
  reply, an unreadable 200): every failed attempt counts, so errors <= requests;
- skipped: requests for the endpoint's model that were not sent because its circuit breaker
  was open and no other endpoint serving the model could take them (the request failed fast);
  a request skipped with two open endpoints counts on both;
- last_error: the last failure's text, shortened and without credentials.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

MAX_ERROR_CHARS = 200

_URL_CREDENTIALS = re.compile(r"(\b[a-z][a-z0-9+.-]*://)[^/@\s]*@", re.IGNORECASE)
_BEARER = re.compile(r"(bearer\s+)\S+", re.IGNORECASE)
_KEY_LIKE = re.compile(r"\b(sk|key|api[_-]?key)[-_=:]\s*[A-Za-z0-9._\-*]{6,}", re.IGNORECASE)


@dataclass
class EndpointUsage:
    base_url: str
    model: str
    requests: int = 0
    errors: int = 0
    skipped: int = 0
    last_error: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.base_url, self.model)


class UsageTally:
    """Per-endpoint usage, added to as requests go and taken in one piece."""

    __slots__ = ("_by_key",)

    def __init__(self) -> None:
        self._by_key: dict[tuple[str, str], EndpointUsage] = {}

    def of(self, base_url: str, model: str) -> EndpointUsage:
        usage = self._by_key.get((base_url, model))
        if usage is None:
            usage = self._by_key[(base_url, model)] = EndpointUsage(base_url, model)
        return usage

    def add(self, usages: Iterable[EndpointUsage]) -> None:
        """Merge counts from elsewhere (a later one's last_error wins)."""
        for other in usages:
            usage = self.of(other.base_url, other.model)
            usage.requests += other.requests
            usage.errors += other.errors
            usage.skipped += other.skipped
            if other.last_error:
                usage.last_error = other.last_error

    def snapshot(self) -> list[EndpointUsage]:
        """Copies, in (base_url, model) order."""
        return [
            EndpointUsage(u.base_url, u.model, u.requests, u.errors, u.skipped, u.last_error)
            for _, u in sorted(self._by_key.items())
        ]

    def take(self) -> list[EndpointUsage]:
        """Everything counted so far, in (base_url, model) order; the tally starts afresh."""
        taken = [u for _, u in sorted(self._by_key.items())]
        self._by_key = {}
        return taken

    def __len__(self) -> int:
        return len(self._by_key)


def short_error(text: str, secret: str = "") -> str:
    """An error text fit to travel to the manager: one line, bounded, no credentials."""
    if secret:
        text = text.replace(secret, "***")
    text = _URL_CREDENTIALS.sub(r"\1", text)
    text = _BEARER.sub(r"\1***", text)
    text = _KEY_LIKE.sub(lambda m: f"{m.group(1)}-***", text)
    text = " ".join(text.split())
    if len(text) > MAX_ERROR_CHARS:
        text = text[: MAX_ERROR_CHARS - 1] + "…"
    return text
