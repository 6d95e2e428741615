"""Settings of a worker node (`populace worker`), read from POPULACE_* environment variables."""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
from pathlib import Path
from typing import Literal

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
    # Prometheus metrics (worker_server.metrics): 0 serves none; P>0 means process i serves
    # /metrics on P+i, bound to metrics_host (None: the gRPC host).
    metrics_port: int = Field(default=0, ge=0, le=65535)
    metrics_host: str | None = None
    # What the manager dials; None resolves to host, or the hostname when host is a wildcard.
    advertise_host: str | None = None
    node: str = Field(default_factory=socket.gethostname)
    # This node's labels, name=value,... (see worker_server.labels): a population can ask for
    # workers carrying some (placement.node_selector).
    labels: str = ""
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
    # LLM hosts this worker may call (and send API keys to): comma-separated host or host:port;
    # empty allows any. See worker_server.llm.access.
    llm_allowed_hosts: str = ""
    # NAME=VALUE lines holding LLM API keys, looked up by an endpoint's api_key_env before the
    # environment is.
    llm_keys_file: Path | None = None
    log_level: str = "INFO"
    # "json": one JSON object per log line (worker_server.logs); the node hands it to its
    # processes with the rest of its settings.
    log_format: Literal["text", "json"] = "text"
    # The secret the manager must present on every gRPC call (see rpc_auth.py); unset, each
    # process makes its own at start and hands it to the manager when it registers.
    rpc_secret: SecretStr | None = None
    # Server reflection lets anyone holding the secret list the services; off unless asked.
    grpc_reflection: bool = False
    # TLS: with a certificate and key the gRPC server only speaks TLS; tls_ca verifies the
    # manager's HTTPS certificate (the system's roots when unset).
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_ca: Path | None = None

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: str) -> str:
        from worker_server.labels import format_labels, parse_labels

        # Normalised, so the value handed to child processes parses back the same.
        return format_labels(parse_labels(value))

    @field_validator("llm_allowed_hosts")
    @classmethod
    def _allowed_hosts(cls, value: str) -> str:
        from worker_server.llm.access import parse_allowed_hosts

        # Normalised, so the value handed to child processes parses back the same.
        return ",".join(map(str, parse_allowed_hosts(value)))

    @field_validator("llm_keys_file")
    @classmethod
    def _keys_file(cls, value: Path | None) -> Path | None:
        if value is not None:
            from worker_server.llm.access import read_keys_file

            if not value.is_file():
                raise ValueError(f"no such file {str(value)!r}")
            try:
                read_keys_file(value)  # a malformed line shows at start, not at the first round
            except OSError as exc:
                raise ValueError(f"cannot read {str(value)!r}: {exc.strerror}") from None
        return value

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
        check_tls_files(self.tls_cert, self.tls_key, self.tls_ca)
        if self.rpc_secret is not None and len(self.rpc_secret.get_secret_value()) < 16:
            raise ValueError("rpc_secret must be at least 16 characters")
        return self

    @property
    def manager_base_url(self) -> str:
        return self.manager_url.rstrip("/")


def format_address(host: str, port: int) -> str:
    """host:port, bracketing IPv6 literals so the address parses back unambiguously."""
    if ":" in host and not host.startswith("["):
        return f"[{host}]:{port}"
    return f"{host}:{port}"


def check_tls_files(cert: Path | None, key: Path | None, ca: Path | None) -> None:
    """The TLS settings of either process kind: a certificate goes with its key, files exist."""
    if (cert is None) != (key is None):
        raise ValueError("tls_cert and tls_key go together: give both or neither")
    for name, path in (("tls_cert", cert), ("tls_key", key), ("tls_ca", ca)):
        if path is not None and not path.is_file():
            raise ValueError(f"{name}: no such file {str(path)!r}")


def is_loopback(host: str) -> bool:
    """Whether only this machine can reach `host` (names are resolved as 'localhost' only)."""
    host = host.strip().strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def warn_if_exposed_without_tls(settings: WorkerSettings) -> None:
    """Plaintext is the loopback default; on a reachable address it deserves a warning."""
    if settings.tls_cert is None and not is_loopback(settings.host):
        logging.getLogger("populace.worker").warning(
            "gRPC on %s without TLS: the calls (and their secret) cross the network in clear; "
            "give the node --tls-cert and --tls-key (see `populace certs init`)",
            settings.host,
        )
