"""The small HTTP/1.1 client against raw socket servers answering in each framing it must read."""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest

from worker_server.llm.http import HttpError, HttpPool


@contextlib.asynccontextmanager
async def raw_server(reply: bytes, seen: list[bytes] | None = None):
    """Answers every request with `reply` verbatim (then closes when the reply says so)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                body = await reader.readexactly(length)
                if seen is not None:
                    seen.append(head + body)
                writer.write(reply)
                await writer.drain()
                if b"Connection: close" in reply or b"Content-Length" not in reply:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()
        await server.wait_closed()


async def test_chunked_bodies_are_reassembled():
    reply = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n"
        b'5\r\n{"a":\r\n3;ext=1\r\n 42\r\n1\r\n}\r\n0\r\nX-Trailer: t\r\n\r\n'
    )
    async with raw_server(reply) as url:
        pool = HttpPool(url)
        first = await pool.request("GET", "/v1/models")
        second = await pool.request("GET", "/v1/models")  # the same connection, still in sync
        await pool.aclose()
    assert first.status == second.status == 200
    assert first.json() == second.json() == {"a": 42}


async def test_a_body_delimited_by_close_is_read_to_the_end():
    reply = b'HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{"ok": true}'
    async with raw_server(reply) as url:
        pool = HttpPool(url)
        responses = [await pool.request("GET", "/x") for _ in range(2)]
        await pool.aclose()
    assert [r.json() for r in responses] == [{"ok": True}] * 2


async def test_requests_carry_the_path_prefix_host_and_key():
    seen: list[bytes] = []
    reply = b"HTTP/1.1 204 No Content\r\n\r\n"
    async with raw_server(reply, seen) as url:
        pool = HttpPool(f"{url}/proxy/", headers={"Authorization": "Bearer k"})
        response = await pool.request("POST", "/v1/completions", {"prompt": "é"})
        await pool.aclose()
    assert response.status == 204 and response.body == b""
    head, body = seen[0].split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /proxy/v1/completions HTTP/1.1"
    assert f"Host: {url.removeprefix('http://')}" in lines
    assert "Authorization: Bearer k" in lines
    assert json.loads(body) == {"prompt": "é"}
    assert f"Content-Length: {len(body)}" in lines


async def test_informational_answers_are_skipped():
    reply = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
    async with raw_server(reply) as url:
        pool = HttpPool(url)
        responses = [await pool.request("POST", "/x", {}) for _ in range(2)]
        await pool.aclose()
    assert [(r.status, r.json()) for r in responses] == [(200, {})] * 2


async def test_an_endless_chunk_line_is_an_http_error():
    reply = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"f" * 300_000
    async with raw_server(reply) as url:
        pool = HttpPool(url)
        with pytest.raises(HttpError, match="too long"):
            await pool.request("GET", "/")
        await pool.aclose()


async def test_garbage_instead_of_http_is_an_error():
    async with raw_server(b"SSH-2.0-OpenSSH\r\n\r\n") as url:
        pool = HttpPool(url)
        with pytest.raises(HttpError, match="not an HTTP response"):
            await pool.request("GET", "/")
        await pool.aclose()


def test_only_http_urls():
    with pytest.raises(ValueError, match="not an http"):
        HttpPool("ftp://example.org")
