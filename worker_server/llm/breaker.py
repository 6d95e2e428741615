"""A circuit breaker per LLM endpoint and model: stop sending to an endpoint that keeps failing.

A pure state machine: the caller passes the time (`now`, seconds on any monotonic clock), so it
is tested without sockets or sleeps. The client (worker_server.llm.client) keeps one per
(base_url, model) for the life of the process, across rounds.

- closed: requests go through. After FAILURE_THRESHOLD consecutive failures it opens.
- open: no requests for COOLDOWN_S; the client routes them to other endpoints serving the
  model, or fails them fast (skipped) when there are none.
- half-open: once the cooldown has passed, exactly one trial request goes through. An answer
  closes the breaker (and the cooldown starts again from COOLDOWN_S); a failure opens it again
  for twice the previous cooldown, up to MAX_COOLDOWN_S.

What counts: a failure is a connection error, a reply that is not HTTP, a 5xx, or an attempt
cut by the agent's deadline (the endpoint did not answer). Any other HTTP reply is an answer:
the endpoint is alive, whatever it thought of the request. That includes 429: a rate-limited
endpoint is alive and says when to come back (the retries' backoff honours it); opening the
circuit on it would turn a busy minute into invalid answers. It still counts as an error in
the round's usage, where the manager sees the share of failed requests.

"Consecutive" is counted in send order: requests in flight together count as one failure, so
a burst that hits every concurrent request at once (a restart, an overloaded moment)
counts once and its retries get their chance; a dead endpoint fails each new wave of
requests, and opens after FAILURE_THRESHOLD of them.
"""

from __future__ import annotations

from dataclasses import dataclass

# Five failed waves in a row, none answered: past what a restart or a burst of 5xx looks
# like, soon enough that a dead endpoint costs a few requests per process, not a round of them.
FAILURE_THRESHOLD = 5
# Long enough that a dead endpoint is not asked again at once, short enough that one back
# from a restart is used again within the round (a round at scale takes seconds to minutes).
COOLDOWN_S = 2.0
# Doubling per failed trial stops at half a minute: an endpoint that comes back is found
# again within about one round, and a dead one costs one trial request per 30 s per process.
MAX_COOLDOWN_S = 30.0

CLOSED = "closed"
OPEN = "open"
HALF_OPEN = "half_open"


@dataclass(frozen=True, slots=True)
class Ticket:
    """One request let through: its place in send order, and whether it is the trial."""

    seq: int
    trial: bool = False


class CircuitBreaker:
    def __init__(
        self,
        threshold: int = FAILURE_THRESHOLD,
        cooldown_s: float = COOLDOWN_S,
        max_cooldown_s: float = MAX_COOLDOWN_S,
    ) -> None:
        if threshold < 1 or cooldown_s <= 0 or max_cooldown_s < cooldown_s:
            raise ValueError("threshold >= 1 and 0 < cooldown_s <= max_cooldown_s")
        self.threshold = threshold
        self.base_cooldown_s = cooldown_s
        self.max_cooldown_s = max_cooldown_s
        self.state = CLOSED
        self.failures = 0  # consecutive counted failures while closed
        self.cooldown_s = cooldown_s  # of the current (or next) opening
        self.opens_until = 0.0  # while open: when a trial may go
        self.trial_in_flight = False
        self.last_error = ""  # the last failure's text, kept across rounds
        self._sent = 0  # tickets issued
        self._counted_before = 0  # a failure counts only if sent at or after this seq

    def available(self, now: float) -> bool:
        """May a request go to this endpoint now?"""
        if self.state == CLOSED:
            return True
        if self.state == OPEN:
            return now >= self.opens_until
        return not self.trial_in_flight

    def send(self, now: float) -> Ticket:
        """A request goes (call only when available(now)); when not closed, it is the trial."""
        seq = self._sent
        self._sent += 1
        if self.state == CLOSED:
            return Ticket(seq)
        self.state = HALF_OPEN
        self.trial_in_flight = True
        return Ticket(seq, trial=True)

    def answered(self, ticket: Ticket) -> None:
        """The endpoint answered (any HTTP reply but a 5xx): it is alive."""
        self.state = CLOSED
        self.failures = 0
        self.cooldown_s = self.base_cooldown_s
        self.trial_in_flight = False

    def recovered(self) -> None:
        """The endpoint proved alive outside a request (a probe answered): close."""
        self.state = CLOSED
        self.failures = 0
        self.cooldown_s = self.base_cooldown_s
        self.trial_in_flight = False
        self._counted_before = self._sent

    def failed(self, ticket: Ticket, now: float, error: str = "") -> None:
        if error:
            self.last_error = error
        if ticket.trial and self.state == HALF_OPEN:
            self.trial_in_flight = False
            self.cooldown_s = min(self.max_cooldown_s, self.cooldown_s * 2)
            self._open(now)
            return
        if self.state != CLOSED or ticket.seq < self._counted_before:
            return  # sent before it opened, or in flight together with a counted failure
        self.failures += 1
        self._counted_before = self._sent
        if self.failures >= self.threshold:
            self._open(now)

    def abandoned(self, ticket: Ticket) -> None:
        """The request was cancelled before an outcome (not the endpoint's doing)."""
        if ticket.trial and self.state == HALF_OPEN:
            self.trial_in_flight = False  # the next request is the trial

    def _open(self, now: float) -> None:
        self.state = OPEN
        self.failures = 0
        self.opens_until = now + self.cooldown_s
