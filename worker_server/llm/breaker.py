"""A circuit breaker per LLM endpoint and model: stop sending to an endpoint that keeps failing.

A pure state machine: the caller passes the time (`now`, seconds on any monotonic clock), so it
is tested without sockets or sleeps. The client (worker_server.llm.client) keeps one per
(base_url, model) for the life of the process, across rounds.

- closed: requests go through. After FAILURE_THRESHOLD failed requests in a row it opens.
- open: no requests for COOLDOWN_S; the client routes them to other endpoints serving the
  model, or fails them fast (skipped) when there are none.
- half-open: once the cooldown has passed, or when a new round starts (`begin_round`), up to
  TRIAL_REQUESTS trial requests go through together, and requests that cannot go wait for
  them rather than being skipped. One answer closes the breaker (and the cooldown starts again
  from COOLDOWN_S); when all TRIAL_REQUESTS trials failed it opens again for twice the previous
  cooldown, up to MAX_COOLDOWN_S. Several trials, each a different request, so that one
  unlucky prompt does not keep a working endpoint shut.

It judges the endpoint, not a prompt: a server may fail one request every time (a prompt it
cannot take, a deterministic 500) while answering all the others. So a request counts once:
the failure of a retry (`Ticket.retry`) never counts toward opening. A 10 %-failing
endpoint therefore never sees five failed requests in a row at any concurrency that matters,
however the retries of its failing prompts bunch up at the end of a round. For the same
reason a retry is never a trial: it waits for the trials of fresh requests, or is skipped.

What counts: a failure is a connection error, a reply that is not HTTP, a 5xx, or an attempt
cut by the agent's deadline (the endpoint did not answer). Any other HTTP reply is an answer:
the endpoint is alive, whatever it thought of the request. That includes 429: a rate-limited
endpoint is alive and says when to come back (the retries' backoff honours it); opening the
circuit on it would turn a busy minute into invalid answers. It still counts as an error in
the round's usage, where the manager sees the share of failed requests.

"In a row" is counted in send order: requests in flight together count as one failure, so
a burst that hits every concurrent request at once (a restart, an overloaded moment)
counts once and the requests after it get their chance; a dead endpoint fails each new wave
of requests, and opens after FAILURE_THRESHOLD of them.

Every change of state is handed to `on_change(old, new, why)` (the client logs it and counts
it in the round's usage, so it reaches the run's timeline).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass

# Five failed waves in a row, none answered: past what a restart or a burst of 5xx looks
# like, soon enough that a dead endpoint costs a few requests per process, not a round of them.
FAILURE_THRESHOLD = 5
# Trials let through together when half-open: all must fail to open again. Three different
# requests all failing on an endpoint that answers 90 % of them happens once in a thousand.
TRIAL_REQUESTS = 3
# Long enough that a dead endpoint is not asked again at once, short enough that one back
# from a restart is used again within the round (a round at scale takes seconds to minutes).
COOLDOWN_S = 2.0
# Doubling per failed half-open stint stops at half a minute: an endpoint that comes back is
# found again within about one round (and at the next round's start), and a dead one costs a
# few trial requests per 30 s per process.
MAX_COOLDOWN_S = 30.0

CLOSED = "closed"
OPEN = "open"
HALF_OPEN = "half_open"

OnChange = Callable[[str, str, str], None]


@dataclass(frozen=True, slots=True)
class Ticket:
    """One request let through: its place in send order, whether it is a retry of a request
    that already failed, and the half-open stint it is a trial of (0: not a trial)."""

    seq: int
    retry: bool = False
    stint: int = 0

    @property
    def trial(self) -> bool:
        return self.stint > 0


class CircuitBreaker:
    def __init__(
        self,
        threshold: int = FAILURE_THRESHOLD,
        cooldown_s: float = COOLDOWN_S,
        max_cooldown_s: float = MAX_COOLDOWN_S,
        trials: int = TRIAL_REQUESTS,
        on_change: OnChange | None = None,
    ) -> None:
        if threshold < 1 or trials < 1 or cooldown_s <= 0 or max_cooldown_s < cooldown_s:
            raise ValueError("threshold >= 1, trials >= 1 and 0 < cooldown_s <= max_cooldown_s")
        self.threshold = threshold
        self.trials = trials
        self.base_cooldown_s = cooldown_s
        self.max_cooldown_s = max_cooldown_s
        self.on_change = on_change
        self.state = CLOSED
        self.failures = 0  # failed requests in a row while closed (waves, retries not counted)
        self.cooldown_s = cooldown_s  # of the current (or next) opening
        self.opens_until = 0.0  # while open: when trials may go
        self.trials_in_flight = 0  # while half-open
        self.trial_failures = 0  # while half-open: trials that failed (retries' not counted)
        self.last_error = ""  # the last failure's text, kept across rounds
        self.round_key: Hashable = None  # the last round that started with this breaker
        self._stint = 0  # half-open stints so far (a trial ticket names its own)
        self._sent = 0  # tickets issued
        self._counted_before = 0  # a failure counts only if sent at or after this seq

    @property
    def deciding(self) -> bool:
        """Half-open with trials in flight: their outcome decides, worth waiting for."""
        return self.state == HALF_OPEN and self.trials_in_flight > 0

    def available(self, now: float, retry: bool = False) -> bool:
        """May a request (a retry of one that failed) go to this endpoint now? A retry is
        never a trial: its prompt failed before, so its failing again would say nothing."""
        if self.state == CLOSED:
            return True
        if retry:
            return False
        if self.state == OPEN:
            return now >= self.opens_until
        return self.trials_in_flight + self.trial_failures < self.trials

    def send(self, now: float, retry: bool = False) -> Ticket:
        """A request goes (call only when available(now, retry)); when not closed, it is a
        trial."""
        seq = self._sent
        self._sent += 1
        if self.state == CLOSED:
            return Ticket(seq, retry)
        if self.state == OPEN:
            self._half_open(f"its {self.cooldown_s:g} s cooldown is over")
        self.trials_in_flight += 1
        return Ticket(seq, retry, self._stint)

    def begin_round(self, key: Hashable) -> bool:
        """A round starts using this endpoint: an open breaker goes half-open at once (its
        trials are the round's first requests) rather than skip the round's requests for the
        rest of a cooldown learnt in an earlier round. Once per round key; True if it changed."""
        if key == self.round_key:
            return False
        self.round_key = key
        if self.state != OPEN:
            return False
        self._half_open("a new round started")
        return True

    def answered(self, ticket: Ticket) -> None:
        """The endpoint answered (any HTTP reply but a 5xx): it is alive."""
        self._end_trial(ticket)
        self._close("a request was answered")

    def recovered(self) -> None:
        """The endpoint proved alive outside a request (a probe answered): close."""
        self._close("a probe was answered")
        self._counted_before = self._sent

    def failed(self, ticket: Ticket, now: float, error: str = "") -> None:
        if error:
            self.last_error = error
        if self._end_trial(ticket):
            self.trial_failures += 1
            if self.trial_failures >= self.trials:
                self.cooldown_s = min(self.max_cooldown_s, self.cooldown_s * 2)
                self._open(now, f"{self.trial_failures} trial requests failed")
            return
        if ticket.retry:
            return  # a request counts once: its first failure
        if self.state != CLOSED or ticket.seq < self._counted_before:
            return  # sent before it opened, or in flight together with a counted failure
        self.failures += 1
        self._counted_before = self._sent
        if self.failures >= self.threshold:
            self._open(now, f"{self.failures} requests failed in a row")

    def abandoned(self, ticket: Ticket) -> None:
        """The request was cancelled before an outcome (not the endpoint's doing)."""
        self._end_trial(ticket)

    def _end_trial(self, ticket: Ticket) -> bool:
        """Whether the ticket is a trial of the current half-open stint (its slot is freed)."""
        if self.state != HALF_OPEN or ticket.stint != self._stint or not ticket.trial:
            return False
        self.trials_in_flight = max(0, self.trials_in_flight - 1)
        return True

    def _half_open(self, why: str) -> None:
        self._stint += 1
        self.trials_in_flight = 0
        self.trial_failures = 0
        self._change(HALF_OPEN, f"{why}; up to {self.trials} trial requests go")

    def _open(self, now: float, why: str) -> None:
        self.failures = 0
        self.opens_until = now + self.cooldown_s
        suffix = f": {self.last_error}" if self.last_error else ""
        self._change(OPEN, f"{why}; no requests for {self.cooldown_s:g} s{suffix}")

    def _close(self, why: str) -> None:
        self.failures = 0
        self.cooldown_s = self.base_cooldown_s
        self.trials_in_flight = 0
        self._change(CLOSED, why)

    def _change(self, state: str, why: str) -> None:
        old, self.state = self.state, state
        if old != state and self.on_change is not None:
            self.on_change(old, state, why)
