"""A real OpenAI-compatible HTTP server for tests and benchmarks.

It speaks the subset of the OpenAI API the workers use, over real sockets:
`GET /v1/models`, `POST /v1/completions` and `POST /v1/chat/completions`, with the real
response shapes including `usage`. One asyncio event loop (its own thread in-process, or its
own process) serves thousands of concurrent keep-alive connections: no thread per connection.

Its behaviour is set at start and may be changed while it runs:
- a fixed latency per request;
- the answer text (default: a number derived from the request's seed and prompt);
- faults for chosen requests: HTTP 500 or 429, unparseable text, empty text, or a hang that
  outlasts any client timeout (ended early when the client goes away);
and it records request bodies (bounded), counts requests, requests in flight and their maximum,
requests whose client went away before the answer, and the Authorization headers of /v1/
requests. With `api_key` it answers /v1/ requests without `Authorization: Bearer KEY` 401, as
OpenAI does.

In-process::

    with OpenAIServer(latency_s=0.05) as server:
        server.base_url            # http://127.0.0.1:PORT
        server.behaviour.fault = lambda request: "500" if request.attempt == 1 else None

As a process (the benchmark needs it out of process)::

    python -m bench.openai_server --port 8011 --latency-s 1.0 --model m   # prints its URL when ready

A process is reconfigured over HTTP: `POST /admin/behaviour` with any of latency_s, hang_s,
fail_rate, rate_limit_rate, hang_rate, garbage_rate, answer_text (null: the default answer);
`GET /admin/stats`; `POST /admin/reset` clears counters and records.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import signal
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

# A fault names what to do instead of answering normally.
FAULTS = ("500", "429", "hang", "garbage", "empty")
GARBAGE_TEXT = "I would rather not say."
_MAX_HEADER_BYTES = 64 * 1024
_MAX_BODY_BYTES = 16 * 1024 * 1024
_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
            413: "Payload Too Large", 429: "Too Many Requests", 500: "Internal Server Error"}  # fmt: skip


@dataclass(frozen=True)
class Request:
    """One parsed generation request, as answer and fault hooks see it."""

    path: str
    body: dict
    # The prompt as one text: the completions prompt, or the chat messages' contents joined by "\n".
    prompt: str
    # 1 for the first request with this (model, seed, prompt), 2 for its first retry, ...
    attempt: int

    @property
    def seed(self) -> int | None:
        seed = self.body.get("seed")
        return seed if isinstance(seed, int) else None


def stable_fraction(text: str) -> float:
    """A number in [0, 1) that depends only on text (not on the process's hash seed)."""
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def default_answer(request: Request) -> str:
    """An integer in [0, 100] derived from the request's seed and prompt."""
    return str(int(stable_fraction(f"{request.seed}|{request.prompt}") * 101))


def rate_fault(
    fail_rate: float = 0.0,
    rate_limit_rate: float = 0.0,
    hang_rate: float = 0.0,
    garbage_rate: float = 0.0,
) -> Callable[[Request], str | None]:
    """Faults for a deterministic share of requests (by seed and prompt, so retries of the
    same request meet the same fault)."""

    def fault(request: Request) -> str | None:
        x = stable_fraction(f"fault|{request.seed}|{request.prompt}")
        for name, rate in (("500", fail_rate), ("429", rate_limit_rate), ("hang", hang_rate),
                           ("garbage", garbage_rate)):  # fmt: skip
            if x < rate:
                return name
            x -= rate
        return None

    return fault


@dataclass
class Behaviour:
    """What the server does; fields may be replaced while it runs."""

    latency_s: float = 0.0
    answer: Callable[[Request], str] = default_answer
    # None: answer normally; otherwise one of FAULTS.
    fault: Callable[[Request], str | None] | None = None
    # How long a hung request waits before answering anyway (the client should give up first).
    hang_s: float = 3600.0


@dataclass(frozen=True)
class Record:
    path: str
    body: dict
    status: int
    # The generated text (empty for errors) and the usage the reply reported.
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class _Stats:
    requests: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    # Requests whose client closed the connection before the answer was written.
    disconnected: int = 0
    connections_opened: int = 0
    by_path: Counter = field(default_factory=Counter)
    by_status: Counter = field(default_factory=Counter)
    attempts: Counter = field(default_factory=Counter)
    # Authorization header of each /v1/ request ("" when none came).
    authorizations: Counter = field(default_factory=Counter)


class OpenAIServer:
    """An OpenAI-compatible server on its own event loop thread; a context manager."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        model: str = "test-model",
        models: Sequence[str] = (),
        latency_s: float = 0.0,
        answer: Callable[[Request], str] | None = None,
        fault: Callable[[Request], str | None] | None = None,
        hang_s: float = 3600.0,
        max_records: int = 10_000,
        backlog: int = 4096,
        api_key: str | None = None,
    ):
        self.host = host
        # When set, /v1/ requests must carry it as a bearer token (401 otherwise).
        self.api_key = api_key
        self.port = port
        self.model = model
        # Every model listed by /v1/models and answered for (the first is `model`).
        self.models = [model, *(m for m in models if m != model)]
        self.backlog = backlog
        self.behaviour = Behaviour(
            latency_s=latency_s, answer=answer or default_answer, fault=fault, hang_s=hang_s
        )
        self._records: deque[Record] = deque(maxlen=max_records)
        self._stats = _Stats()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._connections: set[_Connection] = set()

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> OpenAIServer:
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            self._loop = asyncio.new_event_loop()
            try:
                self._loop.run_until_complete(self.serve_started())
            except BaseException as exc:  # reported to start()'s caller
                failure.append(exc)
                ready.set()
                return
            ready.set()
            self._loop.run_forever()
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

        self._thread = threading.Thread(target=run, name="openai-server", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise failure[0]
        return self

    async def serve_started(self) -> None:
        """Start listening on the running loop (used directly by the process entry point)."""
        self._loop = asyncio.get_running_loop()
        self._server = await self._loop.create_server(
            lambda: _Connection(self), self.host, self.port, backlog=self.backlog
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def close_async(self) -> None:
        if self._server is not None:
            self._server.close()
        for connection in list(self._connections):
            connection.abort()
        if self._server is not None:
            await self._server.wait_closed()

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        asyncio.run_coroutine_threadsafe(self.close_async(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._thread = None

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- what tests read ---------------------------------------------------------------------

    @property
    def records(self) -> list[Record]:
        with self._lock:
            return list(self._records)

    @property
    def bodies(self) -> list[dict]:
        return [record.body for record in self.records]

    @property
    def requests(self) -> int:
        return self._stats.requests

    @property
    def in_flight(self) -> int:
        return self._stats.in_flight

    @property
    def max_in_flight(self) -> int:
        return self._stats.max_in_flight

    @property
    def disconnected(self) -> int:
        return self._stats.disconnected

    @property
    def authorizations(self) -> dict[str, int]:
        """How many /v1/ requests came with each Authorization header ("": none)."""
        with self._lock:
            return dict(self._stats.authorizations)

    def stats(self) -> dict[str, Any]:
        with self._lock:
            s = self._stats
            return {
                "requests": s.requests,
                "in_flight": s.in_flight,
                "max_in_flight": s.max_in_flight,
                "disconnected": s.disconnected,
                "connections_opened": s.connections_opened,
                "by_path": dict(s.by_path),
                "by_status": {str(k): v for k, v in s.by_status.items()},
                "connections": len(self._connections),
            }

    def drop_connections(self) -> None:
        """Close every open connection, as a server restarting or timing out idle ones would."""
        if self._loop is not None:
            done = threading.Event()

            def drop() -> None:
                for connection in list(self._connections):
                    connection.abort()
                done.set()

            self._loop.call_soon_threadsafe(drop)
            done.wait(5)

    def reset(self) -> None:
        """Clear counters and records (the in-flight count stays true)."""
        with self._lock:
            in_flight = self._stats.in_flight
            self._stats = _Stats(in_flight=in_flight, max_in_flight=in_flight)
            self._records.clear()

    # -- request handling (on the server's loop) -----------------------------------------------

    async def handle(
        self, method: str, path: str, body: bytes, authorization: str = ""
    ) -> tuple[int, dict]:
        path = path.split("?", 1)[0]
        if path.startswith("/v1/"):
            with self._lock:
                self._stats.authorizations[authorization] += 1
            if self.api_key is not None and authorization != f"Bearer {self.api_key}":
                with self._lock:
                    self._stats.by_status[401] += 1
                return 401, _error("Incorrect API key provided", "invalid_api_key")
        if path == "/v1/models":
            if method != "GET":
                return 405, _error("use GET", "invalid_request_error")
            return 200, {
                "object": "list",
                "data": [
                    {"id": m, "object": "model", "created": 0, "owned_by": "bench"}
                    for m in self.models
                ],
            }
        if path.startswith("/admin/"):
            return self._admin(method, path, body)
        if path not in ("/v1/completions", "/v1/chat/completions"):
            return 404, _error(f"no route {path}", "not_found")
        if method != "POST":
            return 405, _error("use POST", "invalid_request_error")
        try:
            payload = json.loads(body)
            if not isinstance(payload, dict):
                raise ValueError("the body must be a JSON object")
            prompt = _prompt_of(path, payload)
        except ValueError as exc:
            return 400, _error(f"bad request: {exc}", "invalid_request_error")
        return await self._generate(path, payload, prompt)

    async def _generate(self, path: str, payload: dict, prompt: str) -> tuple[int, dict]:
        behaviour = self.behaviour
        with self._lock:
            stats = self._stats
            stats.requests += 1
            stats.by_path[path] += 1
            key = f"{payload.get('model')}|{payload.get('seed')}|{prompt}"
            stats.attempts[key] += 1
            attempt = stats.attempts[key]
            stats.in_flight += 1
            stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        status, text = 0, ""
        try:
            request = Request(path=path, body=payload, prompt=prompt, attempt=attempt)
            if behaviour.latency_s > 0:
                await asyncio.sleep(behaviour.latency_s)
            fault = behaviour.fault(request) if behaviour.fault else None
            if payload.get("model") not in self.models:
                status = 404
                return status, _error(
                    f"The model `{payload.get('model')}` does not exist.", "model_not_found"
                )
            if fault in ("500", "429"):
                status = int(fault)
                return status, _error(f"injected {fault}", "server_error")
            if fault == "hang":
                await asyncio.sleep(behaviour.hang_s)
            if fault == "garbage":
                text = GARBAGE_TEXT
            elif fault == "empty":
                text = ""
            else:
                text = behaviour.answer(request)
            status = 200
            return status, _completion(path, payload, prompt, text)
        finally:
            with self._lock:
                stats = self._stats  # reset() may have swapped it while this request ran
                stats.in_flight -= 1
                if status:
                    stats.by_status[status] += 1
                    tokens = (count_tokens(prompt), count_tokens(text)) if status == 200 else (0, 0)
                    self._records.append(Record(path, payload, status, text, *tokens))
                else:  # cancelled: the client went away
                    stats.disconnected += 1

    def _admin(self, method: str, path: str, body: bytes) -> tuple[int, dict]:
        if path == "/admin/stats" and method == "GET":
            return 200, self.stats()
        if path == "/admin/reset" and method == "POST":
            self.reset()
            return 200, self.stats()
        if path == "/admin/behaviour" and method == "POST":
            try:
                self.configure(**json.loads(body or b"{}"))
            except (TypeError, ValueError) as exc:
                return 400, _error(str(exc), "invalid_request_error")
            return 200, {"ok": True}
        return 404, _error(f"no route {method} {path}", "not_found")

    def configure(
        self,
        latency_s: float | None = None,
        hang_s: float | None = None,
        fail_rate: float = 0.0,
        rate_limit_rate: float = 0.0,
        hang_rate: float = 0.0,
        garbage_rate: float = 0.0,
        answer_text: str | None = None,
    ) -> None:
        """Reconfigure from plain values (what the command line and /admin/behaviour give)."""
        rates = (fail_rate, rate_limit_rate, hang_rate, garbage_rate)
        if any(not 0.0 <= float(r) <= 1.0 for r in rates) or sum(rates) > 1.0:
            raise ValueError("fault rates must lie in [0, 1] and sum to at most 1")
        if latency_s is not None:
            self.behaviour.latency_s = float(latency_s)
        if hang_s is not None:
            self.behaviour.hang_s = float(hang_s)
        self.behaviour.fault = rate_fault(*map(float, rates)) if any(rates) else None
        self.behaviour.answer = (
            default_answer if answer_text is None else (lambda _request: str(answer_text))
        )


def _error(message: str, kind: str) -> dict:
    return {"error": {"message": message, "type": kind, "code": kind}}


def _prompt_of(path: str, payload: dict) -> str:
    if path == "/v1/completions":
        prompt = payload.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1:
            prompt = prompt[0]
        if not isinstance(prompt, str):
            raise ValueError("prompt must be a string")
        return prompt
    messages = payload.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list")
    parts = []
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            raise ValueError("each message needs a string content")
        parts.append(message["content"])
    return "\n".join(parts)


def count_tokens(text: str) -> int:
    """The usage this server reports: whitespace-separated words."""
    return len(text.split())


def _completion(path: str, payload: dict, prompt: str, text: str) -> dict:
    usage = {
        "prompt_tokens": count_tokens(prompt),
        "completion_tokens": count_tokens(text),
        "total_tokens": count_tokens(prompt) + count_tokens(text),
    }
    created = int(time.time())
    seed = payload.get("seed")
    if path == "/v1/completions":
        return {
            "id": f"cmpl-{seed}",
            "object": "text_completion",
            "created": created,
            "model": payload["model"],
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": "stop"}],
            "usage": usage,
        }
    return {
        "id": f"chatcmpl-{seed}",
        "object": "chat.completion",
        "created": created,
        "model": payload["model"],
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": usage,
    }


class _Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection: requests are answered in order. When the client
    closes the connection, the request being answered is cancelled (as a real server would
    stop generating)."""

    def __init__(self, server: OpenAIServer):
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.task: asyncio.Task | None = None
        self.closing = False

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.server._connections.add(self)
        self.server._stats.connections_opened += 1

    def connection_lost(self, exc) -> None:
        self.closing = True
        self.server._connections.discard(self)
        if self.task is not None:
            self.task.cancel()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self._next()

    def _next(self) -> None:
        if self.task is not None or self.closing:
            return
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buffer) > _MAX_HEADER_BYTES:
                self._reply_and_close(413, _error("headers too large", "invalid_request_error"))
            return
        try:
            method, path, headers = _parse_head(bytes(self.buffer[:end]))
            length = int(headers.get("content-length", "0"))
        except ValueError:
            self._reply_and_close(400, _error("malformed request", "invalid_request_error"))
            return
        if "chunked" in headers.get("transfer-encoding", "") or length > _MAX_BODY_BYTES:
            self._reply_and_close(400, _error("send a Content-Length body", "invalid_request"))
            return
        if len(self.buffer) < end + 4 + length:
            return
        body = bytes(self.buffer[end + 4 : end + 4 + length])
        del self.buffer[: end + 4 + length]
        keep_alive = headers.get("connection", "").lower() != "close"
        authorization = headers.get("authorization", "")
        self.task = asyncio.ensure_future(
            self._answer(method, path, body, keep_alive, authorization)
        )

    async def _answer(
        self, method: str, path: str, body: bytes, keep_alive: bool, authorization: str = ""
    ) -> None:
        try:
            status, payload = await self.server.handle(method, path, body, authorization)
        except asyncio.CancelledError:
            return
        except Exception as exc:  # a bug in a hook: answer 500 rather than hang the client
            status, payload = 500, _error(f"{type(exc).__name__}: {exc}", "server_error")
        self._write(status, payload, keep_alive)
        self.task = None
        if keep_alive:
            self._next()
        elif self.transport is not None:
            self.transport.close()

    def _write(self, status: int, payload: dict, keep_alive: bool) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        data = json.dumps(payload).encode()
        head = (
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
            "Content-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n"
            f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
        )
        self.transport.write(head.encode() + data)

    def _reply_and_close(self, status: int, payload: dict) -> None:
        self.closing = True
        self._write(status, payload, keep_alive=False)
        if self.transport is not None:
            self.transport.close()


def _parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    method, path, _version = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise ValueError(f"bad header line {line!r}")
        headers[name.strip().lower()] = value.strip()
    return method, path, headers


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    parser.add_argument("--model", default="test-model")
    parser.add_argument("--also-serve", action="append", default=[], help="another model id")
    parser.add_argument("--latency-s", type=float, default=0.0)
    parser.add_argument("--hang-s", type=float, default=3600.0)
    parser.add_argument("--fail-rate", type=float, default=0.0, help="share answered HTTP 500")
    parser.add_argument("--rate-limit-rate", type=float, default=0.0, help="share answered 429")
    parser.add_argument("--hang-rate", type=float, default=0.0, help="share that hang")
    parser.add_argument("--garbage-rate", type=float, default=0.0, help="share answered text")
    parser.add_argument("--answer-text", default=None, help="fixed answer (default: a number)")
    args = parser.parse_args(argv)

    server = OpenAIServer(host=args.host, port=args.port, model=args.model, models=args.also_serve)
    try:
        server.configure(
            latency_s=args.latency_s,
            hang_s=args.hang_s,
            fail_rate=args.fail_rate,
            rate_limit_rate=args.rate_limit_rate,
            hang_rate=args.hang_rate,
            garbage_rate=args.garbage_rate,
            answer_text=args.answer_text,
        )
    except ValueError as exc:
        parser.error(str(exc))

    async def serve() -> None:
        await server.serve_started()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        print(server.base_url, flush=True)
        await stop.wait()
        await server.close_async()

    try:
        import uvloop

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:
        runner = asyncio.Runner()
    with runner:
        runner.run(serve())
    sys.exit(0)


if __name__ == "__main__":
    main()
