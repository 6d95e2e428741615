"""Settings of a worker node (`populace worker`), read from POPULACE_* environment variables."""

from __future__ import annotations

import logging
import os
import socket

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# Binding to these means "every interface": no peer can dial them, so we advertise the hostname.
_WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", "[::]", ""})


def _default_procs() -> int:
    return os.cpu_count() or 1


class WorkerSettings(BaseSettings):
    """One node's worker settings; the supervisor passes them to each process as env vars."""

    model_config = SettingsConfigDict(env_prefix="POPULACE_", extra="ignore")

    manager_url: str = "http://127.0.0.1:8000"
    # Required and never defaulted: a default secret would let anyone join the cluster.
    join_token: SecretStr
    host: str = "127.0.0.1"
    # 0 lets the OS pick a free port per process; P>0 means process i listens on P+i.
    port: int = Field(default=0, ge=0, le=65535)
    procs: int = Field(default_factory=_default_procs, ge=1)
    # What the manager dials; None resolves to host, or the hostname when host is a wildcard.
    advertise_host: str | None = None
    node: str = Field(default_factory=socket.gethostname)
    # Memory each agent may use; divides the free memory into the capacity we report. An idle
    # agent's columns take about 60 bytes; the rest is for its persona text (hundreds of bytes
    # when an LLM writes it) and the transient buffers of uploads and rounds.
    bytes_per_agent_budget: int = Field(default=2048, ge=1)
    # Agents each process may host; None derives it from free memory and the budget above.
    capacity: int | None = Field(default=None, ge=0)
    # Agents of one process deciding at once, across all its rounds (cohorts beyond wait).
    max_concurrency: int = Field(default=1_000_000, ge=1)
    # Past decisions each agent remembers.
    agent_memory_size: int = Field(default=8, ge=1, le=255)
    log_level: str = "INFO"

    @field_validator("log_level")
    @classmethod
    def _known_log_level(cls, value: str) -> str:
        level = value.strip().upper()
        if level not in logging.getLevelNamesMapping():
            raise ValueError(f"unknown log level {value!r}")
        return level

    @model_validator(mode="after")
    def _resolve_advertise_host(self) -> WorkerSettings:
        if not self.advertise_host:
            wildcard = self.host.strip() in _WILDCARD_HOSTS
            self.advertise_host = socket.gethostname() if wildcard else self.host
        if not self.join_token.get_secret_value().strip():
            raise ValueError("join_token must not be empty")
        return self

    @property
    def manager_base_url(self) -> str:
        return self.manager_url.rstrip("/")


def format_address(host: str, port: int) -> str:
    """host:port, bracketing IPv6 literals so the address parses back unambiguously."""
    if ":" in host and not host.startswith("["):
        return f"[{host}]:{port}"
    return f"{host}:{port}"
