"""An upload's body, streamed to a file in the uploads folder as it arrives (never held in
memory: an edge list may be gigabytes), then taken as the file itself (a raw body) or as the
`file` part of a multipart/form-data body, found in the written file by its boundary."""

from __future__ import annotations

import asyncio
import mmap
import os
from dataclasses import dataclass
from email.parser import BytesParser
from email.policy import HTTP
from pathlib import Path

from starlette.requests import Request

from backend.graphs import uploads

WRITE_BYTES = 4 * 1024 * 1024  # buffered before each write (one thread hop per 4 MB)
COPY_BYTES = 8 * 1024 * 1024


class BadMultipart(ValueError):
    """The body is not the multipart/form-data its Content-Type says (the message says why)."""


@dataclass
class Received:
    path: Path  # a file in the uploads folder holding the upload's bytes (the caller commits it)
    filename: str | None  # multipart: the part's file name, without any folders
    size: int


async def _write_body(request: Request, fd: int) -> int:
    size, buffer = 0, bytearray()
    with os.fdopen(fd, "wb") as out:
        async for chunk in request.stream():
            buffer += chunk
            if len(buffer) >= WRITE_BYTES:
                await asyncio.to_thread(out.write, bytes(buffer))
                size += len(buffer)
                buffer.clear()
        if buffer:
            await asyncio.to_thread(out.write, bytes(buffer))
            size += len(buffer)
    return size


def boundary_of(content_type: str) -> bytes:
    message = BytesParser(policy=HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n"
    )
    boundary = message.get_boundary()
    if not boundary:
        raise BadMultipart("not a multipart/form-data body: its Content-Type names no boundary")
    return boundary.encode("latin-1")


def file_part(path: Path, boundary: bytes) -> tuple[str | None, int, int]:
    """(file name, first byte, end) of the `file` part, or of the only part, of a multipart
    body kept in `path`. The parts are found by their delimiters (RFC 7578): a part's content
    ends at the CRLF before the next delimiter, which a sender picks so that it never occurs
    in the content."""
    delimiter = b"--" + boundary
    with open(path, "rb") as body:
        if os.fstat(body.fileno()).st_size == 0:
            raise BadMultipart("not a multipart/form-data body: it is empty")
        with mmap.mmap(body.fileno(), 0, access=mmap.ACCESS_READ) as data:
            at = data.find(delimiter)
            parts = []
            while at != -1 and data[at + len(delimiter) : at + len(delimiter) + 2] != b"--":
                head = at + len(delimiter) + 2  # past the delimiter's CRLF
                head_end = data.find(b"\r\n\r\n", head)
                if head_end == -1:
                    raise BadMultipart("not a multipart/form-data body: a part has no headers")
                headers = BytesParser(policy=HTTP).parsebytes(data[head : head_end + 4])
                end = data.find(b"\r\n" + delimiter, head_end + 4)
                if end == -1:
                    raise BadMultipart("not a multipart/form-data body: a part never ends")
                parts.append((headers, head_end + 4, end))
                at = end + 2
    if not parts:
        raise BadMultipart("not a multipart/form-data body: no part found")
    named = [p for p in parts if p[0].get_param("name", header="content-disposition") == "file"]
    if not named and len(parts) != 1:
        raise BadMultipart("send the file as the form's `file` part")
    headers, start, end = (named or parts)[0]
    filename = headers.get_filename()
    return (filename.replace("\\", "/").rsplit("/", 1)[-1] if filename else None), start, end


def _copy_range(source: Path, start: int, end: int, fd: int) -> None:
    with open(source, "rb") as src, os.fdopen(fd, "wb") as out:
        src.seek(start)
        left = end - start
        while left:
            chunk = src.read(min(COPY_BYTES, left))
            out.write(chunk)
            left -= len(chunk)


async def receive(request: Request, data_dir: Path) -> Received:
    """The upload's bytes in a file of the uploads folder. On any error (the body over its
    limit, a broken multipart body) nothing is left behind."""
    fd, body = uploads.incoming(data_dir)
    try:
        size = await _write_body(request, fd)
        content_type = request.headers.get("content-type", "")
        if not content_type.startswith("multipart/form-data"):
            return Received(body, None, size)
        boundary = boundary_of(content_type)
        filename, start, end = await asyncio.to_thread(file_part, body, boundary)
        part_fd, part = uploads.incoming(data_dir)
        try:
            await asyncio.to_thread(_copy_range, body, start, end, part_fd)
        except BaseException:
            part.unlink(missing_ok=True)
            raise
        body.unlink(missing_ok=True)
        return Received(part, filename, end - start)
    except BaseException:
        body.unlink(missing_ok=True)
        raise
