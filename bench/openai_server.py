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

`prompt` may be a list (one choice per prompt) and `n` asks for n choices per prompt, numbered
as vLLM numbers them: prompt i, sample j has index i*n + j (vLLM's completion serving computes
`output.index + prompt_idx * num_choices`). `logprobs` (completions: an int; chat: a bool with
`top_logprobs`) returns per-character tokens with plausible top logprobs in the shapes vLLM
returns.

With `validate="vllm"` (`--validate vllm`) it stands in for the vLLM version pinned in
docker-compose.yml (see VLLM_VERSION): a field that version does not document, a wrong type or an
out-of-range value (n < 1, max_tokens < 1, temperature < 0, logprobs above 20, top_logprobs
without logprobs, a regex that does not compile, two structured-output constraints at once) is
answered 400 with vLLM's error body. That is stricter than vLLM about unknown fields (vLLM
accepts and ignores them with a warning, which is how a wrong field would fail open), on
purpose: a wrong field fails a test. It also honours `structured_outputs` (regex, choice): the
answer text always matches, or the request is answered 400 when its simple generator cannot.
And it reports `usage.prompt_tokens_details.cached_tokens` as vLLM started with
--enable-prompt-tokens-details does, from a small prefix cache of 16-token blocks (PrefixCache).

`stream: true` is answered with server-sent events as vLLM and OpenAI send them (and llama.cpp,
less the usage): `data: {chunk}` events, one per word of the answer (`Behaviour.stream_interval_s`
apart), the last with `finish_reason`, then `data: [DONE]`; with `stream_options:
{"include_usage": true}` a last chunk with empty `choices` carries the usage. `stop` cuts an
answer before the first stop string. As real servers do, it answers 400 when `stream`
is not a boolean, `stream_options` comes without `stream: true`, or `stop` is not a string or a
list of at most 4 strings.

With `toy_lm` (`--toy-lm`) answers come from a toy language model instead (see toy_logprobs):
the text is sampled token by token at the request's temperature with its seed, within its
`structured_outputs` regex, and completions' logprobs are that model's raw (temperature 1,
unconstrained) next-token log-probabilities, with "<eos>" for the end of text as vLLM names
Gemma's: an answer is drawn from the very distribution its logprobs describe, so reading the
distribution from logprobs can be tested against sampling (worker_server.llm.distribution).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import random
import re
import signal
import sys
import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

# A fault names what to do instead of answering normally.
FAULTS = ("500", "429", "hang", "garbage", "empty")
GARBAGE_TEXT = "I would rather not say."
_MAX_HEADER_BYTES = 64 * 1024
_MAX_BODY_BYTES = 16 * 1024 * 1024
# The vLLM release docker-compose.yml pins; validate="vllm" checks requests as it documents them.
VLLM_VERSION = "v0.28.0"
VALIDATIONS = ("vllm",)
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
    # Which of the request's n samples this answer is for (0 for the first).
    sample: int = 0

    @property
    def seed(self) -> int | None:
        seed = self.body.get("seed")
        return seed if isinstance(seed, int) else None


def _loads(body: bytes):
    """JSON as the workers' bodies come (orjson: a million prompts a round), with the stdlib's
    leniency for NaN and Infinity, which a real server would also have to face."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return json.loads(body)


def stable_fraction(text: str) -> float:
    """A number in [0, 1) that depends only on text (not on the process's hash seed)."""
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def default_answer(request: Request) -> str:
    """An integer in [0, 100] derived from the request's seed, prompt and sample number."""
    key = f"{request.seed}|{request.prompt}" + (f"|{request.sample}" if request.sample else "")
    return str(int(stable_fraction(key) * 101))


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
    # Answer with the toy language model (module docstring), `answer` ignored.
    toy_lm: bool = False
    # Pause between two streamed events (stream: true).
    stream_interval_s: float = 0.0


@dataclass(frozen=True)
class Record:
    path: str
    body: dict
    status: int
    # The generated text (empty for errors) and the usage the reply reported.
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # Every choice's text, in index order (text is the first).
    texts: tuple[str, ...] = ()


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
        validate: str | None = None,
    ):
        if validate is not None and validate not in VALIDATIONS:
            raise ValueError(f"validate must be one of {VALIDATIONS} or None, got {validate!r}")
        # "vllm": check requests as the pinned vLLM version documents them (module docstring).
        self.validate = validate
        # vLLM's automatic prefix caching, as --enable-prompt-tokens-details reports it.
        self.prefix_cache = PrefixCache() if validate == "vllm" else None
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
        payload = None
        try:
            payload = _loads(body)
            if not isinstance(payload, dict):
                raise ValueError("the body must be a JSON object")
            check_stream_fields(payload)
            if self.validate == "vllm":
                check_vllm_request(path, payload)
            prompts = _prompts_of(path, payload)
        except VllmInvalid as exc:
            return self._reject(path, payload, exc)
        except ValueError as exc:
            return 400, _error(f"bad request: {exc}", "invalid_request_error")
        status, reply = await self._generate(path, payload, prompts)
        if status == 200 and payload.get("stream") is True:
            return status, Streamed(stream_events(path, payload, reply), self.behaviour)
        return status, reply

    def _reject(self, path: str, payload: dict, exc: VllmInvalid) -> tuple[int, dict]:
        """vLLM's 400 for an invalid request, recorded (it does not count as a request)."""
        with self._lock:
            self._stats.by_status[400] += 1
            self._records.append(Record(path, payload, 400, ""))
        return 400, exc.body()

    def _text(self, request: Request, fault: str | None) -> str:
        if fault == "garbage":
            return GARBAGE_TEXT
        if fault == "empty":
            return ""
        text = toy_answer(request) if self.behaviour.toy_lm else self.behaviour.answer(request)
        if self.validate == "vllm":
            text = honour_structured_outputs(request, text)
        return _cut_at_stop(text, request.body.get("stop"))

    async def _generate(self, path: str, payload: dict, prompts: list[str]) -> tuple[int, dict]:
        prompt = "\n".join(prompts)
        behaviour = self.behaviour
        attempt = self._arrived(path, payload, prompt)
        status, text, texts = 0, "", []
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
            n = payload.get("n") if isinstance(payload.get("n"), int) else 1
            try:
                texts = [
                    self._text(
                        request
                        if len(prompts) == 1 and j == 0
                        else Request(path, payload, p, attempt, sample=j),
                        fault,
                    )
                    for p in prompts
                    for j in range(max(n, 1))
                ]
            except VllmInvalid as exc:
                status = 400
                return status, exc.body()
            text = texts[0]
            status = 200
            cached = None
            if self.prefix_cache is not None:
                cached = self.prefix_cache.take(str(payload.get("model")), prompts)
            return status, _completion(
                path, payload, prompts, texts, cached, toy_lm=behaviour.toy_lm
            )
        finally:
            self._answered(path, payload, prompt, status, text, texts)

    def _arrived(self, path: str, payload: dict, prompt: str) -> int:
        """Count a request in (and in flight); which attempt at this model, seed and prompt it is."""
        with self._lock:
            stats = self._stats
            stats.requests += 1
            stats.by_path[path] += 1
            # A digest, not the text: a million prompts must not keep a million texts alive.
            key = hashlib.blake2b(
                f"{payload.get('model')}|{payload.get('seed')}|{prompt}".encode(), digest_size=16
            ).digest()
            stats.attempts[key] += 1
            attempt = stats.attempts[key]
            stats.in_flight += 1
            stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        return attempt

    def _answered(
        self, path: str, payload: dict, prompt: str, status: int, text: str, texts: list[str]
    ) -> None:
        """Count a request out: record its answer, or (status 0) that the client went away."""
        with self._lock:
            stats = self._stats  # reset() may have swapped it while this request ran
            stats.in_flight -= 1
            if status:
                stats.by_status[status] += 1
                ok = status == 200
                tokens = (count_tokens(prompt), sum(map(count_tokens, texts))) if ok else (0, 0)
                record = Record(path, payload, status, text, *tokens, tuple(texts) if ok else ())
                self._records.append(record)
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
        toy_lm: bool = False,
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
        self.behaviour.toy_lm = bool(toy_lm)


def _error(message: str, kind: str) -> dict:
    return {"error": {"message": message, "type": kind, "code": kind}}


def _prompts_of(path: str, payload: dict) -> list[str]:
    """The prompts a request asks about: one per completions prompt, or the chat messages'
    contents joined by "\n"."""
    if path == "/v1/completions":
        prompt = payload.get("prompt")
        prompts = prompt if isinstance(prompt, list) else [prompt]
        if not prompts or not all(isinstance(p, str) for p in prompts):
            raise ValueError("prompt must be a string or a non-empty list of strings")
        return prompts
    messages = payload.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list")
    parts = []
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("content"), str):
            raise ValueError("each message needs a string content")
        parts.append(message["content"])
    return ["\n".join(parts)]


def count_tokens(text: str) -> int:
    """The usage this server reports: whitespace-separated words."""
    return len(text.split())


class PrefixCache:
    """vLLM's automatic prefix caching, in small: prompts are cut into blocks of BLOCK tokens
    (count_tokens' words), each known by its own words and every block before it; a prompt's
    cached tokens are its leading blocks already seen (at most all but its last token, which
    vLLM always computes), and then all its full blocks are kept. Bounded: the least recently
    used block goes first."""

    BLOCK = 16  # vLLM's default block size

    def __init__(self, max_blocks: int = 1 << 16) -> None:
        self.max_blocks = max_blocks
        self._blocks: OrderedDict[int, None] = OrderedDict()

    def take(self, model: str, prompts: Sequence[str]) -> int:
        """Cached tokens of the prompts, one after the other; remembers their blocks."""
        cached = 0
        for prompt in prompts:
            words = prompt.split()
            key, hit = hash(model), True
            for block in range(len(words) // self.BLOCK):
                key = hash((key, *words[block * self.BLOCK : (block + 1) * self.BLOCK]))
                hit = hit and key in self._blocks and (block + 1) * self.BLOCK < len(words)
                if hit:
                    cached += self.BLOCK
                self._blocks[key] = None
                self._blocks.move_to_end(key)
            while len(self._blocks) > self.max_blocks:
                self._blocks.popitem(last=False)
        return cached


_ALTERNATIVES = "0123456789. "


def _token_logprobs(
    text: str, top: int, key: str
) -> list[tuple[str, float, list[tuple[str, float]]]]:
    """Per-character tokens of text: (token, logprob, the `top` most likely with theirs). The
    sampled token is the most likely; the others share what is left, halving each time."""
    out = []
    for position, token in enumerate(text):
        p = 0.55 + 0.4 * stable_fraction(f"{key}|{position}")
        others = [c for c in _ALTERNATIVES if c != token]
        start = int(stable_fraction(f"{key}|{position}|alt") * len(others))
        others = others[start:] + others[:start]
        rest, ranked = 1.0 - p, [(token, math.log(p))]
        for other in others[: max(top, 1) - 1]:
            rest /= 2
            ranked.append((other, math.log(rest)))
        out.append((token, math.log(p), ranked))
    return out


def _completion_logprobs(text: str, top: int, key: str) -> dict:
    tokens = _token_logprobs(text, top, key)
    return {
        "text_offset": list(range(len(text))),
        "token_logprobs": [lp for _, lp, _ in tokens],
        "tokens": [t for t, _, _ in tokens],
        "top_logprobs": [dict(ranked) for _, _, ranked in tokens],
    }


def _chat_logprobs(text: str, top: int, key: str) -> dict:
    def entry(token: str, logprob: float) -> dict:
        return {"token": token, "logprob": logprob, "bytes": list(token.encode())}

    return {
        "content": [
            {**entry(t, lp), "top_logprobs": [entry(*r) for r in ranked[:top]]}
            for t, lp, ranked in _token_logprobs(text, top, key)
        ]
    }


def _usage(prompts: list[str], texts: list[str], cached: int | None) -> dict[str, Any]:
    prompt_tokens = sum(map(count_tokens, prompts))
    completion_tokens = sum(map(count_tokens, texts))
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if cached is not None:  # as vLLM with --enable-prompt-tokens-details reports it
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return usage


def _text_logprobs(
    payload: dict, prompts: list[str], texts: list[str], index: int, toy_lm: bool
) -> dict | None:
    """A /v1/completions choice's logprobs: none unless a number of them was asked for."""
    logprobs = payload.get("logprobs")
    if logprobs is None or isinstance(logprobs, bool):
        return None
    text = texts[index]
    if toy_lm:
        prompt = prompts[index * len(prompts) // len(texts)]
        return toy_completion_logprobs(prompt, text, logprobs, payload)
    return _completion_logprobs(text, logprobs, f"{payload.get('seed')}|{index}")


def _completion(
    path: str,
    payload: dict,
    prompts: list[str],
    texts: list[str],
    cached: int | None = None,
    toy_lm: bool = False,
) -> dict:
    usage = _usage(prompts, texts, cached)
    created = int(time.time())
    seed = payload.get("seed")
    logprobs = payload.get("logprobs")
    if path == "/v1/completions":
        choices = [
            {
                "index": index,
                "text": text,
                "logprobs": _text_logprobs(payload, prompts, texts, index, toy_lm),
                "finish_reason": "stop",
            }
            for index, text in enumerate(texts)
        ]
        return {
            "id": f"cmpl-{seed}",
            "object": "text_completion",
            "created": created,
            "model": payload["model"],
            "choices": choices,
            "usage": usage,
        }
    top = payload.get("top_logprobs")
    top = top if isinstance(top, int) and not isinstance(top, bool) and top > 0 else 0
    choices = [
        {
            "index": index,
            "message": {"role": "assistant", "content": text},
            "logprobs": _chat_logprobs(text, top, f"{seed}|{index}") if logprobs is True else None,
            "finish_reason": "stop",
        }
        for index, text in enumerate(texts)
    ]
    return {
        "id": f"chatcmpl-{seed}",
        "object": "chat.completion",
        "created": created,
        "model": payload["model"],
        "choices": choices,
        "usage": usage,
    }


# -- streaming (stream: true) -------------------------------------------------------------------

MAX_STOP_STRINGS = 4  # OpenAI's limit; vLLM and llama.cpp take more, none takes other types


def check_stream_fields(payload: dict) -> None:
    """What OpenAI, vLLM and llama.cpp all refuse (ValueError: a 400)."""
    stream = payload.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise ValueError(f"stream must be a boolean, got {stream!r}")
    options = payload.get("stream_options")
    if options is not None:
        if stream is not True:
            raise ValueError("Stream options can only be defined when `stream=True`.")
        if not isinstance(options, dict) or not isinstance(
            options.get("include_usage", False), bool
        ):
            raise ValueError("stream_options must be an object with a boolean include_usage")
    stop = payload.get("stop")
    if stop is None or isinstance(stop, str):
        return
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise ValueError("stop must be a string or a list of strings")
    if len(stop) > MAX_STOP_STRINGS:
        raise ValueError(f"stop may hold at most {MAX_STOP_STRINGS} strings")


def _cut_at_stop(text: str, stop: object) -> str:
    stops = [stop] if isinstance(stop, str) else stop if isinstance(stop, list) else []
    cuts = [text.find(s) for s in stops if s and s in text]
    return text[: min(cuts)] if cuts else text


_PIECES = re.compile(r"\s*\S+|\s+")


@dataclass(frozen=True)
class Streamed:
    """A reply sent as server-sent events rather than one JSON object."""

    events: list[dict]
    behaviour: Behaviour


def stream_events(path: str, payload: dict, reply: dict) -> list[dict]:
    """The chunks a streaming server sends for `reply` (a completed answer): one per word of
    each choice, then each choice's finish, then the usage chunk when asked for."""
    chat = path == "/v1/chat/completions"
    head = {
        "id": reply["id"],
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": reply["created"],
        "model": reply["model"],
    }
    include_usage = bool((payload.get("stream_options") or {}).get("include_usage"))
    extra = {"usage": None} if include_usage else {}

    def chunk(index: int, text: str | None, finish: str | None) -> dict:
        if chat:
            delta = {} if text is None else {"content": text}
            choice = {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}
        else:
            choice = {"index": index, "text": text or "", "logprobs": None,
                      "finish_reason": finish}  # fmt: skip
        return {**head, "choices": [choice], **extra}

    events = []
    for choice in reply["choices"]:
        index = choice["index"]
        text = choice["message"]["content"] if chat else choice["text"]
        if chat:
            events.append({**chunk(index, "", None)})
            events[-1]["choices"][0]["delta"]["role"] = "assistant"
        events.extend(chunk(index, piece, None) for piece in _PIECES.findall(text))
        events.append(chunk(index, None, "stop"))
    if include_usage:
        events.append({**head, "choices": [], "usage": reply["usage"]})
    return events


# -- vLLM as the pinned version documents it ---------------------------------------------------
# Fields from https://docs.vllm.ai/en/v0.28.0/serving/online_serving/openai_compatible_server/
# (the OpenAI parameters plus vLLM's "extra parameters", i.e. CompletionRequest and
# ChatCompletionRequest in vllm/entrypoints/openai/{completion,chat_completion}/protocol.py) and
# https://docs.vllm.ai/en/latest/features/structured_outputs/ (`guided_*` removed in v0.12.0).

_SAMPLING_EXTRAS = {
    "use_beam_search", "top_k", "min_p", "repetition_penalty", "length_penalty",
    "stop_token_ids", "include_stop_str_in_output", "ignore_eos", "min_tokens",
    "skip_special_tokens", "spaces_between_special_tokens", "truncate_prompt_tokens",
    "allowed_token_ids", "prompt_logprobs", "bad_words", "add_special_tokens", "response_format",
    "structured_outputs", "priority", "request_id", "return_tokens_as_token_ids",
    "return_token_ids", "cache_salt", "kv_transfer_params", "vllm_xargs",
}  # fmt: skip
VLLM_FIELDS = {
    "/v1/completions": {
        "model", "prompt", "echo", "frequency_penalty", "logit_bias", "logprobs", "max_tokens",
        "n", "presence_penalty", "seed", "stop", "stream", "stream_options", "suffix",
        "temperature", "top_p", "user", *_SAMPLING_EXTRAS,
    },
    "/v1/chat/completions": {
        "messages", "model", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs",
        "max_tokens", "max_completion_tokens", "n", "presence_penalty", "seed", "stop", "stream",
        "stream_options", "temperature", "top_p", "tools", "tool_choice", "parallel_tool_calls",
        "user", "reasoning_effort", "echo", "add_generation_prompt", "continue_final_message",
        "documents", "chat_template", "chat_template_kwargs", "mm_processor_kwargs",
        *_SAMPLING_EXTRAS,
    },
}  # fmt: skip
# StructuredOutputsParams: one constraint at most, and options.
_CONSTRAINTS = ("json", "regex", "choice", "grammar", "json_object", "structural_tag")
_STRUCTURED_FIELDS = {*_CONSTRAINTS, "disable_fallback", "disable_any_whitespace",
                      "disable_additional_properties", "whitespace_pattern"}  # fmt: skip
# vLLM's default --max-logprobs.
VLLM_MAX_LOGPROBS = 20
_INT64 = (-(2**63), 2**63 - 1)
_MESSAGE_ROLES = {"system", "developer", "user", "assistant", "tool"}


class VllmInvalid(ValueError):
    """A request vLLM answers 400 (or that this stand-in cannot answer faithfully)."""

    def __init__(self, message: str, param: str | None = None):
        super().__init__(message)
        self.param = param

    def body(self) -> dict:
        # vLLM's ErrorResponse.
        return {"error": {"message": str(self), "type": "BadRequestError", "param": self.param,
                          "code": 400}}  # fmt: skip


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)


def check_vllm_request(path: str, payload: dict) -> None:
    """Raise VllmInvalid for what the pinned vLLM rejects, and for fields it does not document
    (vLLM would ignore those: rejecting them here makes a wrong field fail a test)."""
    unknown = sorted(set(payload) - VLLM_FIELDS[path])
    if unknown:
        raise VllmInvalid(f"fields not documented by vLLM {VLLM_VERSION}: {unknown}", unknown[0])
    if "model" in payload and not isinstance(payload["model"], str):
        raise VllmInvalid("model must be a string", "model")
    if path == "/v1/completions":
        prompt = payload.get("prompt")
        if isinstance(prompt, list) and prompt and all(_is_int(t) for t in prompt):
            raise VllmInvalid("token-id prompts are not supported by this stand-in", "prompt")
        if not (isinstance(prompt, str) or (isinstance(prompt, list) and prompt
                                            and all(isinstance(p, str) for p in prompt))):  # fmt: skip
            raise VllmInvalid("prompt must be a string or a non-empty list of strings", "prompt")
    else:
        messages = payload.get("messages")
        if not isinstance(messages, list) or not messages:
            raise VllmInvalid("messages must be a non-empty list", "messages")
        for message in messages:
            if not isinstance(message, dict) or message.get("role") not in _MESSAGE_ROLES:
                raise VllmInvalid("each message needs a known role", "messages")
            if not isinstance(message.get("content"), str):
                raise VllmInvalid("this stand-in takes string message contents", "messages")
    for name in ("max_tokens", "max_completion_tokens"):
        value = payload.get(name)
        if value is not None and (not _is_int(value) or value < 1):
            raise VllmInvalid(f"{name} must be at least 1, got {value!r}", name)
    temperature = payload.get("temperature")
    if temperature is not None and (not _is_number(temperature) or temperature < 0):
        raise VllmInvalid(f"temperature must be non-negative, got {temperature!r}", "temperature")
    n = payload.get("n", 1)
    if not _is_int(n) or n < 1:
        raise VllmInvalid(f"n must be at least 1, got {n!r}", "n")
    seed = payload.get("seed")
    if seed is not None and (not _is_int(seed) or not _INT64[0] <= seed <= _INT64[1]):
        raise VllmInvalid(f"seed must be a 64-bit integer, got {seed!r}", "seed")
    _check_logprobs(path, payload)
    _structured_constraint(payload)


def _check_logprobs(path: str, payload: dict) -> None:
    logprobs = payload.get("logprobs")
    if path == "/v1/completions":
        if logprobs is None:
            return
        if not _is_int(logprobs) or logprobs < 0:
            raise VllmInvalid("`logprobs` must be a positive value.", "logprobs")
        if logprobs > VLLM_MAX_LOGPROBS:
            raise VllmInvalid(f"Requested sample logprobs of {logprobs}, which is greater than "
                              f"max allowed: {VLLM_MAX_LOGPROBS}", "logprobs")  # fmt: skip
        return
    if logprobs is not None and not isinstance(logprobs, bool):
        raise VllmInvalid("logprobs must be a boolean for chat completions", "logprobs")
    top = payload.get("top_logprobs")
    if top is None:
        return
    if not _is_int(top) or top < 0:
        raise VllmInvalid("`top_logprobs` must be a positive value.", "top_logprobs")
    if top > 0 and not logprobs:
        raise VllmInvalid("when using `top_logprobs`, `logprobs` must be set to true.",
                          "top_logprobs")  # fmt: skip
    if top > VLLM_MAX_LOGPROBS:
        raise VllmInvalid(f"Requested sample logprobs of {top}, which is greater than max "
                          f"allowed: {VLLM_MAX_LOGPROBS}", "top_logprobs")  # fmt: skip


# -- the toy language model (toy_lm) ------------------------------------------------------------

TOY_END = "<eos>"
# Its tokens: digits, ".", some a number cannot contain, a two-digit token and the end of text.
TOY_VOCABULARY = (*"0123456789", ".", " ", "\n", "x", "-", "12", TOY_END)
# A numeric regex's valid prefix is whole within two more of these (toy_allowed).
_TOY_COMPLETIONS = ("", *"0123456789.", *(a + b for a in "0123456789." for b in "0123456789"))


def toy_logprobs(context: str) -> dict[str, float]:
    """The toy model's raw next-token log-probabilities after context (prompt + text so far):
    deterministic in the text; the end of text is likelier after a digit."""
    logits = {token: 5.0 * stable_fraction(f"toy|{context}|{token}") for token in TOY_VOCABULARY}
    if context[-1:].isdigit():
        logits[TOY_END] += 1.5
    top = max(logits.values())
    norm = top + math.log(sum(math.exp(v - top) for v in logits.values()))
    return {token: v - norm for token, v in logits.items()}


def toy_allowed(pattern: re.Pattern | None, text: str, token: str) -> bool:
    """Whether a generation within pattern (a numeric regex) may add token to text."""
    if pattern is None:
        return True
    if token == TOY_END:
        return pattern.fullmatch(text) is not None
    return any(pattern.fullmatch(text + token + rest) for rest in _TOY_COMPLETIONS)


def toy_answer(request: Request) -> str:
    """A text sampled from the toy model: plain temperature sampling (T = 0: greedy) with a
    generator seeded by the request's seed, prompt and sample number, within the request's
    structured_outputs regex (the regex is a mask over the raw logits, as in vLLM)."""
    body = request.body
    temperature = body.get("temperature")
    temperature = 1.0 if temperature is None else float(temperature)
    max_tokens = body.get("max_tokens") if isinstance(body.get("max_tokens"), int) else 16
    outputs = body.get("structured_outputs")
    regex = outputs.get("regex") if isinstance(outputs, dict) else None
    pattern = re.compile(regex) if isinstance(regex, str) else None
    rng = random.Random(f"toy|{request.seed}|{request.prompt}|{request.sample}")
    text = ""
    for _ in range(max_tokens):
        logprobs = {
            t: lp for t, lp in toy_logprobs(request.prompt + text).items()
            if toy_allowed(pattern, text, t)
        }  # fmt: skip
        if not logprobs:
            break
        if temperature <= 0:
            token = max(logprobs, key=logprobs.__getitem__)
        else:
            top = max(logprobs.values())
            tokens = list(logprobs)
            weights = [math.exp((logprobs[t] - top) / temperature) for t in tokens]
            token = rng.choices(tokens, weights)[0]
        if token == TOY_END:
            break
        text += token
    return text


def toy_completion_logprobs(prompt: str, text: str, top: int, payload: dict) -> dict:
    """The toy model's logprobs for text after prompt, in vLLM's completions shape: one position
    per token (text split greedily into the vocabulary's tokens), plus the end of text when the
    text ended before max_tokens."""
    tokens, rest = [], text
    while rest:
        token = rest[:2] if rest[:2] in TOY_VOCABULARY else rest[0]
        tokens.append(token)
        rest = rest[len(token) :]
    if len(tokens) < (payload.get("max_tokens") or 16):
        tokens.append(TOY_END)
    out: dict = {"text_offset": [], "token_logprobs": [], "tokens": [], "top_logprobs": []}
    context = prompt
    for token in tokens:
        logprobs = toy_logprobs(context)
        ranked = sorted(logprobs.items(), key=lambda kv: -kv[1])[: max(top, 1)]
        out["text_offset"].append(len(context) - len(prompt))
        out["tokens"].append(token)
        out["token_logprobs"].append(logprobs.get(token, -9999.0))
        out["top_logprobs"].append(dict(ranked))
        context += token
    return out


def _structured_constraint(payload: dict) -> tuple[str, object] | None:
    """The request's (kind, value) structured-output constraint, validated; None without one."""
    params = payload.get("structured_outputs")
    if params is None:
        return None
    if not isinstance(params, dict):
        raise VllmInvalid("structured_outputs must be an object", "structured_outputs")
    unknown = sorted(set(params) - _STRUCTURED_FIELDS)
    if unknown:
        raise VllmInvalid(f"structured_outputs has unknown fields {unknown}", "structured_outputs")
    kinds = [k for k in _CONSTRAINTS if params.get(k) is not None]
    if len(kinds) != 1:
        raise VllmInvalid("You can only use one kind of structured outputs constraint but "
                          f"{len(kinds)} are specified: {kinds}", "structured_outputs")  # fmt: skip
    kind, value = kinds[0], params[kinds[0]]
    if kind == "regex":
        if not isinstance(value, str):
            raise VllmInvalid("structured_outputs.regex must be a string", "structured_outputs")
        try:
            re.compile(value)
        except re.error as exc:
            raise VllmInvalid(f"invalid regex {value!r}: {exc}", "structured_outputs") from None
    elif kind == "choice":
        if not isinstance(value, list) or not value or not all(isinstance(c, str) for c in value):
            raise VllmInvalid("structured_outputs.choice must be a non-empty list of strings",
                              "structured_outputs")  # fmt: skip
    else:
        raise VllmInvalid(f"this stand-in honours regex and choice only, not {kind}",
                          "structured_outputs")  # fmt: skip
    return kind, value


def honour_structured_outputs(request: Request, text: str) -> str:
    """text when it satisfies the request's constraint; else a text that does (a number, from a
    start derived from seed, prompt and sample); VllmInvalid when none is found."""
    constraint = _structured_constraint(request.body)
    if constraint is None:
        return text
    kind, value = constraint
    fraction = stable_fraction(f"so|{request.seed}|{request.prompt}|{request.sample}")
    if kind == "choice":
        return text if text in value else value[int(fraction * len(value))]
    pattern = re.compile(value)
    if pattern.fullmatch(text):
        return text
    start = int(fraction * 10_000)
    for k in range(10_000):
        candidate = str((start + k) % 10_000)
        if pattern.fullmatch(candidate):
            return candidate
    raise VllmInvalid(f"the stand-in cannot produce text matching {value!r}", "structured_outputs")


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
        if isinstance(payload, Streamed):
            try:
                await self._write_stream(payload, keep_alive)
            except asyncio.CancelledError:  # the client went away mid-stream
                return
        else:
            self._write(status, payload, keep_alive)
        self.task = None
        if keep_alive:
            self._next()
        elif self.transport is not None:
            self.transport.close()

    async def _write_stream(self, streamed: Streamed, keep_alive: bool) -> None:
        """Server-sent events, each in its own chunk of a chunked response."""
        head = (
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
            "Transfer-Encoding: chunked\r\n"
            f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
        )
        self.transport.write(head.encode())
        datas = [b"data: " + orjson.dumps(e) + b"\n\n" for e in streamed.events]
        for i, data in enumerate([*datas, b"data: [DONE]\n\n"]):
            if i and streamed.behaviour.stream_interval_s > 0:
                await asyncio.sleep(streamed.behaviour.stream_interval_s)
            if self.transport is None or self.transport.is_closing():
                return
            self.transport.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.transport.write(b"0\r\n\r\n")

    def _write(self, status: int, payload: dict, keep_alive: bool) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        data = orjson.dumps(payload)
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
    parser.add_argument("--toy-lm", action="store_true", help="answer with the toy model")
    parser.add_argument("--validate", choices=VALIDATIONS, default=None,
                        help=f"check requests as vLLM {VLLM_VERSION} documents them")  # fmt: skip
    args = parser.parse_args(argv)

    server = OpenAIServer(
        host=args.host,
        port=args.port,
        model=args.model,
        models=args.also_serve,
        validate=args.validate,
    )
    try:
        server.configure(
            latency_s=args.latency_s,
            hang_s=args.hang_s,
            fail_rate=args.fail_rate,
            rate_limit_rate=args.rate_limit_rate,
            hang_rate=args.hang_rate,
            garbage_rate=args.garbage_rate,
            answer_text=args.answer_text,
            toy_lm=args.toy_lm,
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
