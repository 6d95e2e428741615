"""How the CLI says what went wrong: one line for an unreachable manager, and a config's
validation errors as `file.yaml:12: field: message` (the lines editors and CI logs link)."""

from __future__ import annotations

import re
import socket
from collections.abc import Sequence

import httpx
import yaml

# The API says where a document failed to parse inside the message (backend.documents).
_PARSE_AT = re.compile(r"^line (\d+), column \d+: ")
DOCUMENT = "(document)"
# Connecting failed (refused, no route, unknown host, timed out); not a file error or a bug.
_UNREACHABLE = (
    httpx.ConnectError,
    httpx.TimeoutException,
    ConnectionError,
    TimeoutError,
    socket.gaierror,
)


def unreachable(exc: BaseException, manager: str | None = None) -> str | None:
    """One line for a manager that cannot be reached (None for any other error)."""
    if not isinstance(exc, _UNREACHABLE):
        return None
    url = manager
    request = getattr(exc, "_request", None)
    if url is None and request is not None:
        url = f"{request.url.scheme}://{request.url.netloc.decode()}"
    return f"cannot reach the manager at {url or 'the given URL'}: {_reason(exc)}"


def _reason(exc: BaseException) -> str:
    text = str(exc).lower()
    if "refused" in text or isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, httpx.TimeoutException | TimeoutError) or "timed out" in text:
        return "timed out"
    if "name or service not known" in text or "nodename nor servname" in text:
        return "unknown host"
    if "certificate" in text or "ssl" in text:
        return f"TLS failed ({exc})"
    return str(exc) or type(exc).__name__


def locate(text: str, loc: Sequence[str | int]) -> int | None:
    """The 1-based line of the field `loc` (without "body") in a YAML or JSON document: the
    deepest part of the path that exists (a missing field points at its parent)."""
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return None
    if node is None:
        return None
    line = node.start_mark.line + 1
    for part in loc:
        child = None
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if key.value == str(part):
                    child, line = value, key.start_mark.line + 1
                    break
        elif (
            isinstance(node, yaml.SequenceNode)
            and isinstance(part, int)
            and 0 <= part < len(node.value)
        ):
            child = node.value[part]
            line = child.start_mark.line + 1
        if child is None:
            break
        node = child
    return line


def validation_lines(file_name: str, text: str, issues: list[dict]) -> list[str]:
    """`file.yaml:12: field: message` for each issue of a 422 about a config document."""
    lines = []
    for issue in issues:
        loc = [p for p in issue.get("loc", []) if p != DOCUMENT]
        if loc[:1] == ["body"]:
            loc = loc[1:]
        message = str(issue.get("msg", ""))
        parsed_at = _PARSE_AT.match(message)
        if parsed_at:
            line: int | None = int(parsed_at.group(1))
            message = message[parsed_at.end() :]
        else:
            line = locate(text, loc)
        field = ".".join(str(p) for p in loc)
        where = f"{file_name}:{line}" if line is not None else file_name
        lines.append(f"{where}: {field + ': ' if field else ''}{message}")
    return lines
