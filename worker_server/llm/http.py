"""A small HTTP/1.1 client with keep-alive connections to one origin, on asyncio streams.

Why not httpx: a worker sends one request per agent, hundreds of thousands per round, and
httpx's pool costs milliseconds of CPU per request at a few dozen connections (its connection
bookkeeping is quadratic in the pool size); this client costs about a tenth of a millisecond.
It speaks exactly what OpenAI-compatible servers need: JSON bodies with Content-Length,
responses with Content-Length, chunked, or read to close; http and https.

Cancelling a request (a deadline, CancelRound) closes its connection, so the server sees the
client go away and can stop generating.
"""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
from collections import deque
from dataclasses import dataclass
from urllib.parse import urlsplit

import orjson

MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 32 * 1024 * 1024
_STREAM_LIMIT = 256 * 1024


class HttpError(Exception):
    """The request got no HTTP response: connection refused or reset, malformed response."""


@dataclass(frozen=True)
class HttpResponse:
    status: int
    headers: dict[str, str]  # lower-cased names
    body: bytes

    def json(self):
        try:
            return orjson.loads(self.body)
        except orjson.JSONDecodeError:
            return json.loads(self.body)  # NaN or Infinity, which orjson refuses


class _StaleConnection(HttpError):
    """A kept-alive connection the server had closed before our request reached it."""


class _Connection:
    __slots__ = ("reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @property
    def usable(self) -> bool:
        return not self.writer.is_closing() and not self.reader.at_eof()

    def close(self) -> None:
        # abort, not close: no lingering on a connection we give up on (a cut request).
        self.writer.transport.abort()


class HttpPool:
    """Keep-alive connections to the origin of `base_url`; request paths are appended to its
    path. Concurrency is the caller's to bound: at most `max_idle` connections are kept."""

    def __init__(
        self, base_url: str, *, headers: dict[str, str] | None = None, max_idle: int = 16
    ) -> None:
        url = urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"{base_url!r} is not an http(s) URL")
        self.base_url = base_url
        self._host = url.hostname
        self._port = url.port or (443 if url.scheme == "https" else 80)
        self._ssl = ssl.create_default_context() if url.scheme == "https" else None
        self._prefix = url.path.rstrip("/")
        default_port = self._port == (443 if url.scheme == "https" else 80)
        host_header = url.hostname if default_port else f"{url.hostname}:{self._port}"
        if ":" in url.hostname:  # IPv6 literal
            host_header = f"[{url.hostname}]" + ("" if default_port else f":{self._port}")
        fixed = {"Host": host_header, "Accept": "application/json", **(headers or {})}
        self._head_tail = "".join(f"{k}: {v}\r\n" for k, v in fixed.items())
        self._idle: deque[_Connection] = deque()
        self._max_idle = max(1, max_idle)
        self._closed = False

    async def request(
        self, method: str, path: str, json_body: object | None = None
    ) -> HttpResponse:
        body = b"" if json_body is None else orjson.dumps(json_body)
        head = f"{method} {self._prefix}{path} HTTP/1.1\r\n{self._head_tail}"
        if json_body is not None or method in ("POST", "PUT"):
            head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        message = (head + "\r\n").encode("latin-1") + body
        while True:
            connection, reused = self._take_idle(), True
            if connection is None:
                connection, reused = await self._connect(), False
            try:
                connection.writer.write(message)
                response, keep_alive = await _read_response(connection.reader, method)
            except _StaleConnection:
                connection.close()
                if reused:
                    continue  # the server closed it while idle: our request never ran
                raise HttpError(
                    f"{self.base_url} closed the connection without answering"
                ) from None
            except (ConnectionResetError, BrokenPipeError) as exc:
                connection.close()
                if reused:
                    continue  # reset on a kept-alive connection: the server had dropped it
                raise HttpError(f"connection to {self.base_url} failed: {_describe(exc)}") from exc
            except (
                ConnectionError,
                OSError,
                asyncio.IncompleteReadError,
                asyncio.LimitOverrunError,
            ) as exc:
                connection.close()
                raise HttpError(f"connection to {self.base_url} failed: {_describe(exc)}") from exc
            except BaseException:  # cancelled or a malformed response: the connection is done
                connection.close()
                raise
            self._give_back(connection, keep_alive)
            return response

    async def aclose(self) -> None:
        self._closed = True
        while self._idle:
            self._idle.pop().close()

    def _take_idle(self) -> _Connection | None:
        while self._idle:
            connection = self._idle.pop()
            if connection.usable:
                return connection
            connection.close()
        return None

    def _give_back(self, connection: _Connection, keep_alive: bool) -> None:
        if keep_alive and not self._closed and len(self._idle) < self._max_idle:
            self._idle.append(connection)
        else:
            connection.close()

    async def _connect(self) -> _Connection:
        try:
            reader, writer = await asyncio.open_connection(
                self._host,
                self._port,
                ssl=self._ssl,
                server_hostname=self._host if self._ssl else None,
                limit=_STREAM_LIMIT,
            )
        except ConnectionRefusedError as exc:
            raise HttpError(f"connection refused to {self.base_url}") from exc
        except socket.gaierror as exc:
            raise HttpError(f"cannot resolve host {self._host!r}: {exc.strerror}") from exc
        except (OSError, ssl.SSLError) as exc:
            raise HttpError(f"cannot connect to {self.base_url}: {_describe(exc)}") from exc
        return _Connection(reader, writer)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, asyncio.IncompleteReadError):
        return "the server closed the connection mid-response"
    if isinstance(exc, asyncio.LimitOverrunError):
        return "a response line is too long"
    return str(exc) or type(exc).__name__


async def _read_response(reader: asyncio.StreamReader, method: str) -> tuple[HttpResponse, bool]:
    first = True
    while True:
        version, status, headers = await _read_head(reader, first)
        first = False
        if not 100 <= status < 200:
            break  # informational answers (100 Continue, 103 Early Hints) precede the real one
    keep_alive = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
    if method == "HEAD" or status in (204, 304):
        return HttpResponse(status, headers, b""), keep_alive
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = await _read_chunked(reader)
    elif "content-length" in headers:
        try:
            length = int(headers["content-length"])
        except ValueError as exc:
            raise HttpError("bad Content-Length") from exc
        if not 0 <= length <= MAX_BODY_BYTES:
            raise HttpError(f"response body of {length} bytes is too large")
        body = await reader.readexactly(length)
    else:  # delimited by the server closing the connection
        body = await reader.read(MAX_BODY_BYTES + 1)
        while len(body) <= MAX_BODY_BYTES and not reader.at_eof():
            more = await reader.read(MAX_BODY_BYTES + 1 - len(body))
            if not more:
                break
            body += more
        if len(body) > MAX_BODY_BYTES:
            raise HttpError("response body too large")
        keep_alive = False
    return HttpResponse(status, headers, body), keep_alive


async def _read_head(reader: asyncio.StreamReader, first: bool) -> tuple[str, int, dict[str, str]]:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if first and not exc.partial:
            raise _StaleConnection() from exc
        raise
    except asyncio.LimitOverrunError as exc:
        raise HttpError("response headers too large") from exc
    if len(head) > MAX_HEADER_BYTES:
        raise HttpError("response headers too large")
    lines = head[:-4].decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or not parts[1].isdigit():
        raise HttpError(f"not an HTTP response: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return parts[0], int(parts[1]), headers


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    chunks = []
    total = 0
    while True:
        line = await reader.readuntil(b"\r\n")
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError as exc:
            raise HttpError("bad chunk size") from exc
        if size == 0:
            # Trailers (if any) end with an empty line.
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass
            return b"".join(chunks)
        total += size
        if total > MAX_BODY_BYTES:
            raise HttpError("response body too large")
        chunks.append(await reader.readexactly(size))
        await reader.readexactly(2)  # the CRLF after each chunk
