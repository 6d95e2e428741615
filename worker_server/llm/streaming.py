"""One streamed completion (`stream: true`): the server-sent events of an OpenAI-compatible
server, parsed as they arrive.

Rounds never stream (one short answer per agent, on pooled keep-alive connections: see
worker_server.llm.http); an interview does, so its answer reaches the page token by token. It is
one request now and then, so it takes its own connection and closes it at the end: a stream cut
half way (a deadline, the caller going away) leaves nothing behind in the round's pool, and the
server sees the client go and stops generating.

The events are what vLLM, OpenAI and llama.cpp send: `data: {json}` lines, an empty line
between events, `data: [DONE]` at the end. A server that ignores `stream` and answers one JSON
object is read as a single event.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import orjson

from worker_server.llm.client import error_text

# The round client's response-head reader: one definition of what a valid head is.
from worker_server.llm.http import MAX_BODY_BYTES, HttpError, HttpResponse, _read_head

_STREAM_LIMIT = 256 * 1024
_READ_BYTES = 16 * 1024


class StreamFailed(Exception):
    """The stream gave no answer, or broke off. `broken`: the endpoint itself failed (no HTTP
    answer, a 5xx, a cut stream), as opposed to refusing this request (4xx)."""

    def __init__(self, message: str, *, broken: bool) -> None:
        super().__init__(message)
        self.broken = broken


async def stream_events(
    base_url: str, path: str, body: dict, *, api_key: str = ""
) -> AsyncIterator[dict]:
    """POST `body` to base_url + path and yield each event's JSON object as it arrives; raises
    StreamFailed (an HTTP error status, a connection problem, an error event)."""
    url = urlsplit(base_url)
    tls = url.scheme == "https"
    host = url.hostname or ""
    port = url.port or (443 if tls else 80)
    where = f"{base_url}{path}"
    try:
        reader, writer = await asyncio.open_connection(
            host,
            port,
            ssl=ssl.create_default_context() if tls else None,
            server_hostname=host if tls else None,
            limit=_STREAM_LIMIT,
        )
    except (OSError, ssl.SSLError) as exc:
        raise StreamFailed(f"cannot connect to {base_url}: {exc}", broken=True) from exc
    try:
        writer.write(_request_bytes(url, path, body, api_key))
        try:
            _version, status, headers = await _read_head(reader, False)
        except (HttpError, OSError, asyncio.IncompleteReadError) as exc:
            raise StreamFailed(f"no answer from {where}: {exc or 'closed'}", broken=True) from exc
        if status != 200:
            text = await _error_body(reader, headers)
            raise StreamFailed(f"HTTP {status} from {where}: {text}", broken=status >= 500)
        chunks = _body_chunks(reader, headers)
        if headers.get("content-type", "").startswith("application/json"):
            # Not streamed after all: the whole completion in one object.
            yield _event(b"".join([c async for c in chunks]), where)
            return
        async for data in _sse_data(chunks):
            if data == b"[DONE]":
                return
            yield _event(data, where)
        raise StreamFailed(f"{where} ended the stream without [DONE]", broken=True)
    except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
        raise StreamFailed(f"the stream from {where} broke off: {exc}", broken=True) from exc
    finally:
        writer.transport.abort()  # one request per connection, finished or cut


def _request_bytes(url, path: str, body: dict, api_key: str) -> bytes:
    payload = orjson.dumps(body)
    default_port = url.port is None
    host = url.hostname if default_port else f"{url.hostname}:{url.port}"
    headers = [
        f"POST {url.path.rstrip('/')}{path} HTTP/1.1",
        f"Host: {host}",
        "Accept: text/event-stream",
        "Content-Type: application/json",
        f"Content-Length: {len(payload)}",
        "Connection: close",
    ]
    if api_key:
        headers.append(f"Authorization: Bearer {api_key}")
    return ("\r\n".join(headers) + "\r\n\r\n").encode("latin-1") + payload


def _event(data: bytes, where: str) -> dict:
    try:
        event = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise StreamFailed(f"unreadable event from {where}: {exc}", broken=False) from exc
    if not isinstance(event, dict):
        raise StreamFailed(f"an event from {where} is not a JSON object", broken=False)
    error = event.get("error")
    if error:  # vLLM reports a failure mid-stream as an error event
        message = error.get("message") if isinstance(error, dict) else error
        raise StreamFailed(f"{where} failed mid-stream: {message}", broken=True)
    return event


async def _body_chunks(reader: asyncio.StreamReader, headers: dict[str, str]):
    """The response body in pieces as they arrive (chunked, by length, or to close)."""
    total = 0
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            line = await reader.readuntil(b"\r\n")
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError as exc:
                raise HttpError("bad chunk size") from exc
            if size == 0:
                return
            total += size
            if total > MAX_BODY_BYTES:
                raise HttpError("response body too large")
            yield await reader.readexactly(size)
            await reader.readexactly(2)
    left = int(headers["content-length"]) if "content-length" in headers else None
    while left is None or left > 0:
        piece = await reader.read(_READ_BYTES if left is None else min(left, _READ_BYTES))
        if not piece:
            if left:
                raise asyncio.IncompleteReadError(b"", left)
            return
        total += len(piece)
        if total > MAX_BODY_BYTES:
            raise HttpError("response body too large")
        if left is not None:
            left -= len(piece)
        yield piece


async def _sse_data(chunks) -> AsyncIterator[bytes]:
    """The data of each server-sent event (its `data:` lines joined by newlines)."""
    buffer = b""
    data: list[bytes] = []
    async for chunk in chunks:
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for raw in lines:
            line = raw.rstrip(b"\r")
            if not line:
                if data:
                    yield b"\n".join(data)
                    data = []
            elif line.startswith(b"data:"):
                data.append(line[5:].removeprefix(b" "))
            # Comments (": ping") and other fields (event:, id:) carry nothing we use.
    if data:
        yield b"\n".join(data)


async def _error_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> str:
    """The error message of a refused request, bounded."""
    try:
        pieces = []
        async for piece in _body_chunks(reader, headers):
            pieces.append(piece)
            if sum(map(len, pieces)) > 64 * 1024:
                break
        body = b"".join(pieces)
    except (HttpError, OSError, asyncio.IncompleteReadError):
        body = b""
    return error_text(HttpResponse(0, headers, body))
