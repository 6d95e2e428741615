"""The worker process's LLM client: routing, concurrency caps, circuit breakers, deadlines and
retries.

One `LlmClient` per worker process, shared by every round and persona call, so an endpoint's
cap (requests in flight from this process) holds across all of them. Endpoints with the same
URL, key and cap share one keep-alive connection pool.

- Routing: a request goes to the least-loaded endpoint (in flight / cap) among those serving
  its model whose circuit breaker lets it through; a retry goes to another endpoint than the
  one that just failed when the model has one. When all are full it waits in line; a freed
  slot is handed straight to the first waiter, so nobody is overtaken.
- Breakers (worker_server.llm.breaker): one per (base_url, model), for the life of the process.
  An open endpoint gets no requests; when every endpoint of the model is open, the request
  fails at once (CircuitOpen, counted as skipped, not as failed) instead of waiting on or
  hammering a dead server. While an endpoint's half-open trials are out, requests that cannot
  go wait for their outcome instead. A round's start (`begin_round`) puts open breakers
  half-open. Each change of state is logged and counted in the usage of the round it
  happened in (breaker_opened, breaker_half_opened, breaker_closed).
- Deadline: `timeout_s` is the agent's budget for one answer, retries and backoff included. It
  starts when the request first gets a slot, so waiting behind the cap does not use it up.
- Retries: connection errors, 5xx and 429 are retried up to `max_retries` times with
  exponential backoff and jitter (a 429's Retry-After is honoured within the budget); other
  answers fail at once.
- Usage: `complete` counts attempts, failed attempts and skips per endpoint into the caller's
  UsageTally (worker_server.llm.usage), so a round reports what it asked of each endpoint.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, replace

from worker_server.llm.access import LlmAccess
from worker_server.llm.breaker import CLOSED, HALF_OPEN, OPEN, CircuitBreaker, Ticket
from worker_server.llm.http import HttpError, HttpPool, HttpResponse
from worker_server.llm.protocol import Completion, Generation, parse_completion
from worker_server.llm.spec import EndpointSpec
from worker_server.llm.usage import EndpointUsage, UsageTally, short_error, without_credentials
from worker_server.stats import LoadCounters

log = logging.getLogger("populace.worker.llm")

BACKOFF_BASE_S = 0.2
BACKOFF_MAX_S = 4.0


class LlmFailure(Exception):
    """No answer: the retries ran out or the server refused the request (an llm_error)."""


class CircuitOpen(LlmFailure):
    """Every endpoint serving the model has its circuit open: the request was not sent."""


class LlmTimeout(Exception):
    """The per-agent deadline cut the request (the agent is late)."""

    def __init__(self, message: str, failed_attempts: int) -> None:
        super().__init__(message)
        self.failed_attempts = failed_attempts


class Endpoint:
    """One endpoint's live state in this process."""

    def __init__(self, spec: EndpointSpec) -> None:
        self.spec = spec
        self.cap = spec.max_concurrency
        headers = {"Authorization": f"Bearer {spec.api_key}"} if spec.api_key else None
        self.pool = HttpPool(spec.base_url, headers=headers, max_idle=self.cap)
        self.in_flight = 0
        self.max_in_flight = 0
        # Requests waiting for a slot: the lane each would use it through, whether it is a
        # retry, and the usage its breaker's changes are counted in.
        self.waiters: deque[Waiter] = deque()

    @property
    def load(self) -> float:
        return self.in_flight / self.cap


Waiter = tuple["asyncio.Future[tuple[Lane, Ticket] | None]", "Lane", bool, "UsageTally | None"]


class Lane:
    """One endpoint as it serves one model: its dialect and the breaker of (base_url, model)."""

    __slots__ = ("batch_size", "breaker", "endpoint", "model", "server")

    def __init__(self, endpoint: Endpoint, spec: EndpointSpec, breaker: CircuitBreaker) -> None:
        self.endpoint = endpoint
        self.model = spec.model
        self.server = spec.server
        self.batch_size = spec.batch_size
        self.breaker = breaker

    @property
    def base_url(self) -> str:
        return self.endpoint.spec.base_url


class Route:
    """The lanes that can answer for one model."""

    def __init__(self, model: str, lanes: Sequence[Lane]) -> None:
        self.model = model
        self.lanes = list(lanes)

    @property
    def endpoints(self) -> list[Endpoint]:
        return [lane.endpoint for lane in self.lanes]

    @property
    def capacity(self) -> int:
        return sum(lane.endpoint.cap for lane in self.lanes)

    @property
    def batch_size(self) -> int:
        """Prompts per request: a batch is made before its lane is chosen, so it must fit the
        smallest batch of the lanes serving the model."""
        return min(lane.batch_size for lane in self.lanes)


@dataclass
class _Call:
    """One request across its attempts: what its timeout or cancellation has to settle."""

    lane: Lane | None  # the lane it holds a slot on; None between attempts
    ticket: Ticket
    started: float
    failures: int = 0
    sending: bool = False  # an attempt is on the wire (lane and ticket are its)


class LlmClient:
    def __init__(
        self,
        load: LoadCounters | None = None,
        *,
        backoff_base_s: float = BACKOFF_BASE_S,
        backoff_max_s: float = BACKOFF_MAX_S,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
        access: LlmAccess | None = None,
    ) -> None:
        self.load = load if load is not None else LoadCounters()
        # Which hosts requests may go to and where API keys come from (this worker's settings).
        self.access = access if access is not None else LlmAccess()
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self._rng = rng or random.Random()
        self._clock = clock  # the breakers' time (tests step it by hand)
        self._endpoints: dict[tuple, Endpoint] = {}
        self._breakers: dict[tuple[str, str], CircuitBreaker] = {}
        # Requests waiting for a half-open breaker's trials to decide.
        self._deciding: dict[CircuitBreaker, list[asyncio.Future[None]]] = {}

    # -- endpoints and routing -------------------------------------------------------------

    def endpoint(self, spec: EndpointSpec) -> Endpoint:
        endpoint = self._endpoints.get(spec.pool_key)
        if endpoint is None:
            endpoint = self._endpoints[spec.pool_key] = Endpoint(spec)
        return endpoint

    def breaker(self, base_url: str, model: str) -> CircuitBreaker:
        """The process's breaker for this endpoint and model."""
        breaker = self._breakers.get((base_url, model))
        if breaker is None:
            breaker = CircuitBreaker(on_change=_logger(base_url, model))
            self._breakers[(base_url, model)] = breaker
        return breaker

    def begin_round(
        self, routes: Iterable[Route], key: Hashable, usage: UsageTally | None = None
    ) -> None:
        """A round (named by `key`) starts on these routes: their open breakers go half-open,
        so the round's first requests are trials rather than skipped (once per key)."""
        for route in routes:
            for lane in route.lanes:
                before = lane.breaker.state
                lane.breaker.begin_round(key)
                self._judged(lane, before, usage)

    def routes(self, specs: Iterable[EndpointSpec]) -> dict[str, Route]:
        """model -> the lanes serving it."""
        by_model: dict[str, list[Lane]] = {}
        for spec in specs:
            lanes = by_model.setdefault(spec.model, [])
            endpoint = self.endpoint(spec)
            if all(lane.endpoint is not endpoint for lane in lanes):
                lanes.append(Lane(endpoint, spec, self.breaker(spec.base_url, spec.model)))
        return {model: Route(model, lanes) for model, lanes in by_model.items()}

    async def acquire(
        self,
        route: Route,
        usage: UsageTally | None = None,
        *,
        avoid: Lane | None = None,
        last_error: str = "",
        retry: bool = False,
    ) -> tuple[Lane, Ticket]:
        """A slot on the least-loaded lane of the route whose breaker lets a request through
        (another than `avoid` when there is one); waits in line when all are full, and for
        half-open trials when those are all that could let it through. Raises CircuitOpen
        (counted as skipped in `usage`) when no lane may take the request."""
        while True:
            now = self._clock()
            usable = [lane for lane in route.lanes if lane.breaker.available(now, retry)]
            if not usable:
                deciding = [lane.breaker for lane in route.lanes if lane.breaker.deciding]
                if deciding:
                    await self._until_decided(deciding)
                    continue
                raise self._skipped(route, usage, last_error)
            if avoid is not None and len(usable) > 1:
                # A retry waits for another endpoint rather than ask the one that just failed.
                usable = [lane for lane in usable if lane is not avoid] or usable
            free = [lane for lane in usable if lane.endpoint.in_flight < lane.endpoint.cap]
            if free:
                lane = min(free, key=lambda lane: lane.endpoint.load)
                self._take(lane.endpoint)
                return lane, self._send(lane, now, retry, usage)
            waiter: asyncio.Future[tuple[Lane, Ticket] | None]
            waiter = asyncio.get_running_loop().create_future()
            for lane in usable:
                lane.endpoint.waiters.append((waiter, lane, retry, usage))
            try:
                handed = await waiter
            except asyncio.CancelledError:
                if waiter.done() and not waiter.cancelled() and waiter.result() is not None:
                    lane, ticket = waiter.result()  # handed a slot just as we were cancelled
                    self._abandoned(lane, ticket, usage)
                    self.release(lane.endpoint)
                raise
            if handed is not None:
                return handed
            # None: the lane we waited on opened its circuit; look at the route again.

    def release(self, endpoint: Endpoint) -> None:
        now = self._clock()
        while endpoint.waiters:
            waiter, lane, retry, usage = endpoint.waiters.popleft()
            if waiter.done():
                continue
            if not lane.breaker.available(now, retry):
                waiter.set_result(None)  # it must go elsewhere, wait for trials, or fail fast
                continue
            waiter.set_result((lane, self._send(lane, now, retry, usage)))  # the slot passes on
            break
        else:
            endpoint.in_flight -= 1
        # Every outcome ends in a release (interviews use the breakers directly): a good moment
        # to wake the requests whose trials have decided.
        self._wake_decided()

    # -- breakers: their changes counted in the usage, and requests waiting on trials -------

    def _send(self, lane: Lane, now: float, retry: bool, usage: UsageTally | None) -> Ticket:
        before = lane.breaker.state
        ticket = lane.breaker.send(now, retry)
        self._judged(lane, before, usage)
        return ticket

    def _answered(self, lane: Lane, ticket: Ticket, usage: UsageTally | None) -> None:
        before = lane.breaker.state
        lane.breaker.answered(ticket)
        self._judged(lane, before, usage)

    def _failed(self, lane: Lane, ticket: Ticket, error: str, usage: UsageTally | None) -> None:
        before = lane.breaker.state
        lane.breaker.failed(ticket, self._clock(), error)
        self._judged(lane, before, usage)

    def _abandoned(self, lane: Lane, ticket: Ticket, usage: UsageTally | None) -> None:
        before = lane.breaker.state
        lane.breaker.abandoned(ticket)
        self._judged(lane, before, usage)

    def _judged(self, lane: Lane, before: str, usage: UsageTally | None) -> None:
        """After an outcome: count a change of state in the usage, and wake the requests
        waiting on this breaker's trials (they look again)."""
        breaker = lane.breaker
        if breaker.state != before and usage is not None:
            counts = usage.of(lane.base_url, lane.model)
            if breaker.state == OPEN:
                counts.breaker_opened += 1
            elif breaker.state == HALF_OPEN:
                counts.breaker_half_opened += 1
            elif breaker.state == CLOSED:
                counts.breaker_closed += 1
        self._wake_decided()

    def _wake_decided(self) -> None:
        for breaker in [b for b in self._deciding if not b.deciding]:
            for waiter in self._deciding.pop(breaker):
                if not waiter.done():
                    waiter.set_result(None)

    async def _until_decided(self, breakers: list[CircuitBreaker]) -> None:
        """Until one of these half-open breakers' trials has decided (closed or opened)."""
        waiter = asyncio.get_running_loop().create_future()
        for breaker in breakers:
            waiters = self._deciding.setdefault(breaker, [])
            waiters[:] = [w for w in waiters if not w.done()]  # those cancelled meanwhile
            waiters.append(waiter)
        await waiter

    @staticmethod
    def _take(endpoint: Endpoint) -> None:
        endpoint.in_flight += 1
        endpoint.max_in_flight = max(endpoint.max_in_flight, endpoint.in_flight)

    @staticmethod
    def _skipped(route: Route, usage: UsageTally | None, last_error: str) -> CircuitOpen:
        reason = last_error
        for lane in route.lanes:
            reason = reason or lane.breaker.last_error
            if usage is not None:
                counts = usage.of(lane.base_url, lane.model)
                counts.skipped += 1
                if not counts.last_error:
                    counts.last_error = lane.breaker.last_error
        return CircuitOpen(
            f"every endpoint serving {route.model!r} is failing (circuit open); "
            f"last error: {reason or 'unknown'}"
        )

    # -- requests --------------------------------------------------------------------------

    async def complete(
        self,
        route: Route,
        generation: Generation,
        *,
        timeout_s: float,
        max_retries: int,
        usage: UsageTally | None = None,
    ) -> Completion:
        """The completion for one request (raises LlmFailure, CircuitOpen or LlmTimeout).
        Attempts, failed attempts and skips are counted per endpoint in `usage`."""
        usage = usage if usage is not None else UsageTally()
        lane, ticket = await self.acquire(route, usage)
        call = _Call(lane, ticket, asyncio.get_running_loop().time())
        try:
            async with asyncio.timeout(timeout_s):
                return await self._attempts(call, route, generation, max_retries, usage)
        except TimeoutError:
            if call.sending and call.lane is not None:
                lane = call.lane
                cut = f"no answer from {lane.base_url} within the agent's {timeout_s:g} s"
                counts = usage.of(lane.base_url, lane.model)
                counts.late += 1
                self._failed(lane, call.ticket, self._counted(lane, counts, cut), usage)
            raise LlmTimeout(
                f"no answer within {timeout_s:g} s ({call.failures} failed attempts)",
                call.failures,
            ) from None
        except asyncio.CancelledError:
            if call.sending and call.lane is not None:
                self._abandoned(call.lane, call.ticket, usage)
            raise
        finally:
            if call.lane is not None:
                self.release(call.lane.endpoint)

    async def _attempts(
        self,
        call: _Call,
        route: Route,
        generation: Generation,
        max_retries: int,
        usage: UsageTally,
    ) -> Completion:
        """Attempt until one is answered, on another lane after a failure when there is one;
        raises LlmFailure when the request was at fault or its retries are used up."""
        loop = asyncio.get_running_loop()
        while True:
            lane = call.lane
            assert lane is not None
            counts = usage.of(lane.base_url, lane.model)
            counts.requests += 1
            call.sending = True
            sent_at = loop.time()
            outcome, retry_after, broken = await self._attempt(lane, generation)
            call.sending = False
            # Looked up again: the caller may have taken the tally's counts meanwhile
            # (a part of the round sent on), and these must land in the new ones.
            counts = usage.of(lane.base_url, lane.model)
            if isinstance(outcome, Completion):
                self._answered(lane, call.ticket, usage)
                counts.answered(
                    loop.time() - sent_at,
                    outcome.prompt_tokens,
                    outcome.completion_tokens,
                    outcome.cached_tokens,
                )
                return replace(outcome, elapsed_s=loop.time() - call.started)
            call.failures += 1
            error = self._counted(lane, counts, outcome)
            if broken:
                self._failed(lane, call.ticket, error, usage)
            else:  # it answered (a 4xx, or a 429 asking us to slow down): alive
                self._answered(lane, call.ticket, usage)
            if retry_after is None:  # the request was at fault
                raise LlmFailure(outcome)
            if call.failures > max_retries:
                raise LlmFailure(outcome)
            self.release(lane.endpoint)
            call.lane = None
            await asyncio.sleep(self._backoff(call.failures, retry_after))
            # A retry: its failure does not count against the endpoint again.
            call.lane, call.ticket = await self.acquire(
                route, usage, avoid=lane, last_error=error, retry=True
            )

    @staticmethod
    def _counted(lane: Lane, counts: EndpointUsage, error: str) -> str:
        """Count a failed attempt; the error as it may be reported."""
        text = short_error(error, lane.endpoint.spec.api_key)
        counts.errors += 1
        counts.last_error = text
        return text

    async def _attempt(
        self, lane: Lane, generation: Generation
    ) -> tuple[Completion | str, float | None, bool]:
        """(completion, None, False), or (error text, retry delay hint or None when not
        retryable, whether the endpoint itself failed: no HTTP answer, or a 5xx)."""
        endpoint = lane.endpoint
        body = generation.body(lane.server)
        self.load.inflight_llm_calls += 1
        self.load.llm_requests += 1
        try:
            response = await endpoint.pool.request("POST", generation.path, body)
        except HttpError as exc:
            return str(exc), 0.0, True
        finally:
            self.load.inflight_llm_calls -= 1
        where = f"{endpoint.spec.base_url}{generation.path}"
        if response.status == 200:
            try:
                return (
                    parse_completion(generation.api, response.json(), generation.size),
                    None,
                    False,
                )
            except ValueError as exc:  # json errors are ValueErrors too
                return f"unreadable reply from {where}: {exc}", None, False
        error = f"HTTP {response.status} from {where}: {error_text(response)}"
        if response.status >= 500:
            return error, _retry_after(response), True
        if response.status == 429:
            return error, _retry_after(response), False
        return error, None, False

    def _backoff(self, failures: int, hint: float) -> float:
        delay = min(self.backoff_max_s, self.backoff_base_s * 2 ** (failures - 1))
        delay = delay / 2 + self._rng.uniform(0, delay / 2)  # jitter: retries do not march in step
        return max(delay, min(hint, self.backoff_max_s))

    async def get(self, spec: EndpointSpec, path: str) -> HttpResponse:
        """A GET outside the cap (probes); raises HttpError."""
        return await self.endpoint(spec).pool.request("GET", path)

    async def aclose(self) -> None:
        for endpoint in self._endpoints.values():
            await endpoint.pool.aclose()
        self._endpoints.clear()
        self._breakers.clear()


def _logger(base_url: str, model: str) -> Callable[[str, str, str], None]:
    """Logs a breaker's changes (the worker's log, which the dashboard shows per worker)."""
    where = without_credentials(base_url)

    def changed(old: str, new: str, why: str) -> None:
        level = logging.WARNING if new == OPEN else logging.INFO
        said = {OPEN: "opened", HALF_OPEN: "half-open", CLOSED: "closed"}[new]
        log.log(
            level,
            "LLM endpoint %s (model %r): circuit %s (was %s): %s",
            where,
            model,
            said,
            old.replace("_", "-"),
            short_error(why),
        )

    return changed


def error_text(response: HttpResponse) -> str:
    text = response.body[:300].decode("utf-8", "replace").strip()
    try:
        error = response.json().get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            text = error["message"][:300]
        elif isinstance(error, str):
            text = error[:300]
    except (ValueError, AttributeError):
        pass
    return text or "(empty body)"


def _retry_after(response: HttpResponse) -> float:
    try:
        return max(0.0, float(response.headers.get("retry-after", "0")))
    except ValueError:
        return 0.0
