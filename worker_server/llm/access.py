"""What this worker allows an LLM request to do: which hosts it may call, and where it finds
their API keys.

Keys never travel in a request. An endpoint names a variable (`api_key_env: OPENAI_API_KEY`)
and the worker looks it up when it validates the request:

1. in its keys file (setting `llm_keys_file`, POPULACE_LLM_KEYS_FILE) when it has one: NAME=VALUE
   lines, `#` comments and blank lines ignored, a value may be wrapped in one pair of quotes.
   It is read on every request, so a rotated key is used from the next round on;
2. else in its own environment.

The file comes first so that the operator's secret store decides, not a variable that happens
to be set in the shell that started the worker. Names starting with POPULACE_ are the worker's
own settings (its join token among them) and are never handed out as LLM keys.

`llm_allowed_hosts` (POPULACE_LLM_ALLOWED_HOSTS: comma-separated `host` or `host:port`; empty
allows any) bounds where requests, and so keys, may go: an endpoint on another host is refused
(INVALID_ARGUMENT) before anything is sent.

No message here ever holds a key's value: only the variable's name, the node and the file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from worker_server.llm.spec import InvalidLlmRequest

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_ENV_NAME = 128
RESERVED_PREFIX = "POPULACE_"
DEFAULT_PORTS = {"http": 80, "https": 443}
# The keys file is a handful of lines; a bigger one is a mistake (the wrong file).
MAX_KEYS_FILE_BYTES = 1 << 20


class HostNotAllowed(InvalidLlmRequest):
    """An endpoint on a host this worker's allow-list does not name."""


class MissingLlmKey(InvalidLlmRequest):
    """An endpoint's api_key_env names a variable this worker does not have."""


def env_name_problem(name: str) -> str | None:
    """Why `name` cannot name an API key variable, or None when it can."""
    if len(name) > MAX_ENV_NAME or not ENV_NAME.fullmatch(name):
        return (
            f"{name[:MAX_ENV_NAME]!r} is not an environment variable name (letters, digits and _, "
            f"not starting with a digit, at most {MAX_ENV_NAME} characters), e.g. OPENAI_API_KEY"
        )
    if name.upper().startswith(RESERVED_PREFIX):
        return f"{name} is one of the worker's own settings ({RESERVED_PREFIX}*), not an LLM key"
    return None


@dataclass(frozen=True)
class AllowedHost:
    host: str  # lower case, IPv6 without brackets
    port: int | None  # None: any port

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"

    def allows(self, host: str, port: int) -> bool:
        return self.host == host and (self.port is None or self.port == port)


def _allowed_host(entry: str) -> AllowedHost:
    text = entry.strip().lower()
    if any(c in text for c in "/@?# \t"):
        raise ValueError(f"{entry!r} is not host or host:port (no scheme, user or path)")
    if text.startswith("["):  # [v6] or [v6]:port
        host, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ValueError(f"{entry!r} is not host or host:port")
        port_text = rest[1:] if rest else None
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    else:  # a name, an IPv4 address, or a bare IPv6 address (any port)
        host, port_text = text, None
    if not host or any(c in host for c in "[]"):
        raise ValueError(f"{entry!r} is not host or host:port")
    port = None
    if port_text is not None:
        if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
            raise ValueError(f"{entry!r}: the port must be in 1..65535")
        port = int(port_text)
    return AllowedHost(host.rstrip("."), port)


def parse_allowed_hosts(text: str) -> tuple[AllowedHost, ...]:
    """`gpu-1, gpu-2:8000, [::1]:8081` (ValueError naming a bad entry); empty allows any."""
    return tuple(_allowed_host(entry) for entry in text.split(",") if entry.strip())


def read_keys_file(path: Path) -> dict[str, str]:
    """NAME=VALUE lines (ValueError naming the line, never its text; OSError when unreadable)."""
    with open(path, "rb") as file:
        data = file.read(MAX_KEYS_FILE_BYTES + 1)
    if len(data) > MAX_KEYS_FILE_BYTES:
        raise ValueError(f"{path} is larger than {MAX_KEYS_FILE_BYTES} bytes")
    keys = {}
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not ENV_NAME.fullmatch(name):
            raise ValueError(f"line {number} of {path} is not NAME=VALUE")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        keys[name] = value
    return keys


@dataclass(frozen=True)
class LlmAccess:
    """One worker process's rules for LLM requests; the default allows any host and reads
    keys from the environment only."""

    node: str = ""
    allowed_hosts: tuple[AllowedHost, ...] = ()
    keys_file: Path | None = None
    environ: Callable[[str], str | None] = os.environ.get

    @classmethod
    def from_settings(cls, settings) -> LlmAccess:
        """From WorkerSettings (llm_allowed_hosts, llm_keys_file, node)."""
        return cls(
            node=settings.node,
            allowed_hosts=parse_allowed_hosts(settings.llm_allowed_hosts),
            keys_file=settings.llm_keys_file,
        )

    @property
    def _where(self) -> str:
        return f"worker node {self.node!r}" if self.node else "this worker"

    def check_host(self, base_url: str, field: str) -> None:
        """HostNotAllowed unless the allow-list is empty or names the URL's host (and port)."""
        if not self.allowed_hosts:
            return
        parts = urlsplit(base_url)
        host = (parts.hostname or "").rstrip(".")
        port = parts.port or DEFAULT_PORTS.get(parts.scheme, 0)
        if any(allowed.allows(host, port) for allowed in self.allowed_hosts):
            return
        shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        allowed = ", ".join(map(str, self.allowed_hosts))
        raise HostNotAllowed(
            f"{field}: host {shown} is not allowed by {self._where}: its llm_allowed_hosts "
            f"(POPULACE_LLM_ALLOWED_HOSTS) allows {allowed}"
        )

    def key_resolver(self) -> Callable[[str, str], str]:
        """resolve(name, field) -> the key, or MissingLlmKey; reads the keys file at most once."""
        file_keys: dict[str, str] | None = None

        def resolve(name: str, field: str) -> str:
            nonlocal file_keys
            problem = env_name_problem(name)
            if problem is not None:
                raise InvalidLlmRequest(f"{field}: {problem}")
            value = None
            if self.keys_file is not None:
                if file_keys is None:
                    try:
                        file_keys = read_keys_file(self.keys_file)
                    except (OSError, ValueError) as exc:
                        raise MissingLlmKey(
                            f"{field}: {self._where} cannot read its llm_keys_file "
                            f"(POPULACE_LLM_KEYS_FILE): {exc}"
                        ) from None
                value = file_keys.get(name)
            if value is None:
                value = self.environ(name)
            if not value:
                state = "is empty" if value == "" else "is not set"
                source = "its environment"
                if self.keys_file is not None:
                    source = f"its keys file {self.keys_file} or {source}"
                raise MissingLlmKey(
                    f"{field}: the API key variable {name} {state} on {self._where}: set it in "
                    f"{source} (POPULACE_LLM_KEYS_FILE names a NAME=VALUE file)"
                )
            if any(c in value for c in "\r\n\0"):
                raise MissingLlmKey(
                    f"{field}: the API key variable {name} on {self._where} contains a line break"
                )
            return value

        return resolve
