"""What a caller (a round, a part of a cohort) asked of each LLM endpoint: a few counters per
(base_url, model), never anything per agent.

- requests: attempts sent, retries included;
- errors: attempts that got no usable completion (connection error, timeout, any non-200
  reply, an unreadable 200): every failed attempt counts, so errors <= requests;
- skipped: requests for the endpoint's model that were not sent because its circuit breaker
  was open and no other endpoint serving the model could take them (the request failed fast);
  a request skipped with two open endpoints counts on both. Skipped is not failed: a skipped
  request never reached the endpoint (its agent has no answer all the same);
- breaker_opened, breaker_half_opened, breaker_closed: how often the endpoint's circuit breaker
  changed to that state while serving the caller (worker_server.llm.breaker);
- last_error: the last failure's text, shortened and without credentials;
- prompt_tokens, completion_tokens, cached_tokens: what the server reported for the answered
  requests;
- late: attempts cut by the agents' deadline while on the wire (also counted in errors);
- latency: answered attempts' latencies, counted in fixed log-spaced buckets so percentiles
  merge across processes and rounds by adding counts (as Prometheus histograms do).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from worker_server.rpc import worker_pb2 as pb

MAX_ERROR_CHARS = 200

_URL_CREDENTIALS = re.compile(r"(\b[a-z][a-z0-9+.-]*://)[^/@\s]*@", re.IGNORECASE)
_BEARER = re.compile(r"(bearer\s+)\S+", re.IGNORECASE)
_KEY_LIKE = re.compile(r"\b(sk|key|api[_-]?key)[-_=:]\s*[A-Za-z0-9._\-*]{6,}", re.IGNORECASE)


# Upper bounds of the latency buckets: √2 apart from 1 ms to about 17 minutes; one more bucket
# takes anything slower. A percentile read from them is within a bucket (about ±20 %).
LATENCY_BOUNDS_S: tuple[float, ...] = tuple(0.001 * 2 ** (k / 2) for k in range(41))
LATENCY_BUCKETS = len(LATENCY_BOUNDS_S) + 1


def latency_bucket(seconds: float) -> int:
    return bisect.bisect_left(LATENCY_BOUNDS_S, seconds)


def latency_quantile(counts: Sequence[int], q: float) -> float | None:
    """The q-quantile (0 < q < 1) of bucketed latencies, interpolated geometrically inside its
    bucket; None when nothing was counted."""
    total = sum(counts)
    if total == 0:
        return None
    rank = q * total
    seen = 0
    for i, n in enumerate(counts):
        if n and seen + n >= rank:
            low = LATENCY_BOUNDS_S[i - 1] if i > 0 else LATENCY_BOUNDS_S[0] / 2**0.5
            high = LATENCY_BOUNDS_S[i] if i < len(LATENCY_BOUNDS_S) else low * 2**0.5
            return low * (high / low) ** ((rank - seen) / n)
        seen += n
    return LATENCY_BOUNDS_S[-1]


@dataclass
class EndpointUsage:
    base_url: str
    model: str
    requests: int = 0
    errors: int = 0
    skipped: int = 0
    last_error: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    late: int = 0
    breaker_opened: int = 0
    breaker_half_opened: int = 0
    breaker_closed: int = 0
    # Answered attempts per latency bucket (empty until the first answer) and their sum.
    latency_counts: list[int] = field(default_factory=list)
    latency_sum_s: float = 0.0

    @property
    def key(self) -> tuple[str, str]:
        return (self.base_url, self.model)

    def answered(self, seconds: float, prompt_tokens: int, completion_tokens: int, cached: int):
        """Count one answered attempt: its latency and the tokens the server reported."""
        if not self.latency_counts:
            self.latency_counts = [0] * LATENCY_BUCKETS
        self.latency_counts[latency_bucket(seconds)] += 1
        self.latency_sum_s += seconds
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        self.cached_tokens += cached

    def merge(self, other: EndpointUsage) -> None:
        """Add another's counts (its last_error, if any, wins)."""
        self.requests += other.requests
        self.errors += other.errors
        self.skipped += other.skipped
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cached_tokens += other.cached_tokens
        self.late += other.late
        self.breaker_opened += other.breaker_opened
        self.breaker_half_opened += other.breaker_half_opened
        self.breaker_closed += other.breaker_closed
        self.latency_sum_s += other.latency_sum_s
        if other.latency_counts:
            if not self.latency_counts:
                self.latency_counts = [0] * LATENCY_BUCKETS
            for i, n in enumerate(other.latency_counts[:LATENCY_BUCKETS]):
                self.latency_counts[i] += n
        if other.last_error:
            self.last_error = other.last_error

    def copy(self) -> EndpointUsage:
        usage = EndpointUsage(self.base_url, self.model)
        usage.merge(self)
        usage.last_error = self.last_error
        return usage


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
            self.of(other.base_url, other.model).merge(other)

    def snapshot(self) -> list[EndpointUsage]:
        """Copies, in (base_url, model) order."""
        return [u.copy() for _, u in sorted(self._by_key.items())]

    def take(self) -> list[EndpointUsage]:
        """Everything counted so far, in (base_url, model) order; the tally starts afresh."""
        taken = [u for _, u in sorted(self._by_key.items())]
        self._by_key = {}
        return taken

    def __len__(self) -> int:
        return len(self._by_key)


def without_credentials(text: str) -> str:
    """The text with every URL's user:password@ cut (e.g. a base URL shown as a metric label)."""
    return _URL_CREDENTIALS.sub(r"\1", text)


def short_error(text: str, secret: str = "") -> str:
    """An error text fit to travel to the manager: one line, bounded, no credentials."""
    if secret:
        text = text.replace(secret, "***")
    text = without_credentials(text)
    text = _BEARER.sub(r"\1***", text)
    text = _KEY_LIKE.sub(lambda m: f"{m.group(1)}-***", text)
    text = " ".join(text.split())
    if len(text) > MAX_ERROR_CHARS:
        text = text[: MAX_ERROR_CHARS - 1] + "…"
    return text


def usage_message(usage: EndpointUsage) -> pb.EndpointUsage:
    """An endpoint's usage on the wire (a round's parts, a peer's read)."""
    return pb.EndpointUsage(
        base_url=usage.base_url,
        model=usage.model,
        requests=usage.requests,
        errors=usage.errors,
        skipped=usage.skipped,
        last_error=usage.last_error,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cached_tokens=usage.cached_tokens,
        late=usage.late,
        latency_counts=usage.latency_counts,
        latency_sum_s=usage.latency_sum_s,
        breaker_opened=usage.breaker_opened,
        breaker_half_opened=usage.breaker_half_opened,
        breaker_closed=usage.breaker_closed,
    )


def usage_from_message(message: pb.EndpointUsage) -> EndpointUsage:
    return EndpointUsage(
        base_url=message.base_url,
        model=message.model,
        requests=message.requests,
        errors=message.errors,
        skipped=message.skipped,
        last_error=message.last_error,
        prompt_tokens=message.prompt_tokens,
        completion_tokens=message.completion_tokens,
        cached_tokens=message.cached_tokens,
        late=message.late,
        latency_counts=list(message.latency_counts),
        latency_sum_s=message.latency_sum_s,
        breaker_opened=message.breaker_opened,
        breaker_half_opened=message.breaker_half_opened,
        breaker_closed=message.breaker_closed,
    )
