"""The worker process's LLM client: routing, concurrency caps, deadlines and retries.

One `LlmClient` per worker process, shared by every round and persona call, so an endpoint's
cap (requests in flight from this process) holds across all of them. Endpoints with the same
URL, key and cap share one keep-alive connection pool.

- Routing: a request goes to the least-loaded endpoint (in flight / cap) among those serving
  its model. When all are full it waits in line; a freed slot is handed straight to the first
  waiter, so nobody is overtaken.
- Deadline: `timeout_s` is the agent's budget for one answer, retries and backoff included. It
  starts when the request first gets a slot, so waiting behind the cap does not use it up.
- Retries: connection errors, 5xx and 429 are retried up to `max_retries` times with
  exponential backoff and jitter (a 429's Retry-After is honoured within the budget); other
  answers fail at once.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import replace

from worker_server.llm.http import HttpError, HttpPool, HttpResponse
from worker_server.llm.protocol import Completion, Generation, parse_completion
from worker_server.llm.spec import EndpointSpec
from worker_server.stats import LoadCounters

BACKOFF_BASE_S = 0.2
BACKOFF_MAX_S = 4.0


class LlmFailure(Exception):
    """No answer: the retries ran out or the server refused the request (an llm_error)."""


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
        self.waiters: deque[asyncio.Future[Endpoint]] = deque()

    @property
    def load(self) -> float:
        return self.in_flight / self.cap


class Route:
    """The endpoints that can answer for one model, with the server dialect of each."""

    def __init__(self, model: str, endpoints: Sequence[tuple[Endpoint, EndpointSpec]]) -> None:
        self.model = model
        self.endpoints = [endpoint for endpoint, _ in endpoints]
        self.servers = {id(endpoint): spec.server for endpoint, spec in endpoints}

    @property
    def capacity(self) -> int:
        return sum(e.cap for e in self.endpoints)

    def server_of(self, endpoint: Endpoint) -> str:
        return self.servers[id(endpoint)]


class LlmClient:
    def __init__(
        self,
        load: LoadCounters | None = None,
        *,
        backoff_base_s: float = BACKOFF_BASE_S,
        backoff_max_s: float = BACKOFF_MAX_S,
        rng: random.Random | None = None,
    ) -> None:
        self.load = load if load is not None else LoadCounters()
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self._rng = rng or random.Random()
        self._endpoints: dict[tuple, Endpoint] = {}

    # -- endpoints and routing -------------------------------------------------------------

    def endpoint(self, spec: EndpointSpec) -> Endpoint:
        endpoint = self._endpoints.get(spec.pool_key)
        if endpoint is None:
            endpoint = self._endpoints[spec.pool_key] = Endpoint(spec)
        return endpoint

    def routes(self, specs: Iterable[EndpointSpec]) -> dict[str, Route]:
        """model -> the endpoints serving it."""
        by_model: dict[str, list[tuple[Endpoint, EndpointSpec]]] = {}
        for spec in specs:
            pairs = by_model.setdefault(spec.model, [])
            endpoint = self.endpoint(spec)
            if all(e is not endpoint for e, _ in pairs):
                pairs.append((endpoint, spec))
        return {model: Route(model, pairs) for model, pairs in by_model.items()}

    async def acquire(self, route: Route) -> Endpoint:
        """A slot on the least-loaded endpoint of the route; waits in line when all are full."""
        best = min(route.endpoints, key=lambda e: e.load)
        if best.in_flight < best.cap:
            self._take(best)
            return best
        waiter: asyncio.Future[Endpoint] = asyncio.get_running_loop().create_future()
        for endpoint in route.endpoints:
            endpoint.waiters.append(waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release(waiter.result())  # handed a slot just as we were cancelled
            raise

    def release(self, endpoint: Endpoint) -> None:
        while endpoint.waiters:
            waiter = endpoint.waiters.popleft()
            if not waiter.done():
                waiter.set_result(endpoint)  # the slot passes on: in_flight stays
                return
        endpoint.in_flight -= 1

    @staticmethod
    def _take(endpoint: Endpoint) -> None:
        endpoint.in_flight += 1
        endpoint.max_in_flight = max(endpoint.max_in_flight, endpoint.in_flight)

    # -- requests --------------------------------------------------------------------------

    async def complete(
        self, route: Route, generation: Generation, *, timeout_s: float, max_retries: int
    ) -> Completion:
        """The completion for one request (raises LlmFailure or LlmTimeout)."""
        endpoint: Endpoint | None = await self.acquire(route)
        loop = asyncio.get_running_loop()
        started = loop.time()
        failures = 0
        try:
            async with asyncio.timeout(timeout_s):
                while True:
                    assert endpoint is not None
                    outcome, retry_after = await self._attempt(endpoint, route, generation)
                    if isinstance(outcome, Completion):
                        return replace(outcome, elapsed_s=loop.time() - started)
                    failures += 1
                    if retry_after is None or failures > max_retries:
                        raise LlmFailure(outcome)
                    self.release(endpoint)
                    endpoint = None
                    await asyncio.sleep(self._backoff(failures, retry_after))
                    endpoint = await self.acquire(route)
        except TimeoutError:
            raise LlmTimeout(
                f"no answer within {timeout_s:g} s ({failures} failed attempts)", failures
            ) from None
        finally:
            if endpoint is not None:
                self.release(endpoint)

    async def _attempt(
        self, endpoint: Endpoint, route: Route, generation: Generation
    ) -> tuple[Completion | str, float | None]:
        """(completion, None), or (error text, retry delay hint or None when not retryable)."""
        body = generation.body(route.server_of(endpoint))
        self.load.inflight_llm_calls += 1
        try:
            response = await endpoint.pool.request("POST", generation.path, body)
        except HttpError as exc:
            return str(exc), 0.0
        finally:
            self.load.inflight_llm_calls -= 1
        where = f"{endpoint.spec.base_url}{generation.path}"
        if response.status == 200:
            try:
                return parse_completion(generation.api, response.json()), None
            except ValueError as exc:  # json errors are ValueErrors too
                return f"unreadable reply from {where}: {exc}", None
        error = f"HTTP {response.status} from {where}: {error_text(response)}"
        if response.status == 429 or response.status >= 500:
            return error, _retry_after(response)
        return error, None

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
