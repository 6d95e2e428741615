"""Validated, plain descriptions of LLM endpoints and requests (built from the proto messages)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from worker_server.llm.access import LlmAccess

DEFAULT_ENDPOINT_CONCURRENCY = 16
MAX_ENDPOINT_CONCURRENCY = 100_000
SERVERS = ("vllm", "llama_cpp", "openai")
APIS = ("chat", "completions")
# Prompt arrays: vLLM and OpenAI take several prompts in one /v1/completions request;
# llama.cpp answers one prompt per request, and a chat request carries one conversation.
BATCHING_SERVERS = ("vllm", "openai")
MAX_BATCH_SIZE = 1024


class InvalidLlmRequest(ValueError):
    """A request naming bad LLM settings; the message names the field."""


@dataclass(frozen=True)
class EndpointSpec:
    base_url: str  # without a trailing "/" or "/v1": request paths are /v1/...
    model: str
    max_concurrency: int
    # Resolved on this worker from api_key_env (worker_server.llm.access); never printed.
    api_key: str = field(default="", repr=False)
    server: str = "openai"
    api_key_env: str = ""
    # Why the key could not be resolved, when endpoint_specs was asked to report rather than
    # raise (a probe fails that endpoint with it).
    key_problem: str = ""
    # Prompts one request may carry (a prompt array; see check_batch_size).
    batch_size: int = 1

    @property
    def pool_key(self) -> tuple[str, str, int]:
        """Endpoints with equal keys share connections and their concurrency cap."""
        return (self.base_url, self.api_key, self.max_concurrency)


def normalise_base_url(base_url: str, field: str) -> str:
    url = base_url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidLlmRequest(f"{field} must be an http(s) URL, got {base_url!r}")
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError as exc:
        raise InvalidLlmRequest(f"{field}: {exc}") from None
    url = url.rstrip("/")
    # Accept the OpenAI-style base URL ending in /v1 as well: the paths we append carry it.
    return url[: -len("/v1")] if url.endswith("/v1") else url


def endpoint_specs(
    endpoints: Iterable,
    field: str = "endpoints",
    access: LlmAccess | None = None,
    *,
    missing_keys_ok: bool = False,
) -> tuple[EndpointSpec, ...]:
    """Validate proto LlmEndpoint messages (or anything with the same attributes) under this
    worker's `access` rules: a host it does not allow is HostNotAllowed; an api_key_env it
    cannot resolve is MissingLlmKey, or with `missing_keys_ok` a spec without a key whose
    `key_problem` says why."""
    # Imported here: the access rules build on this module's InvalidLlmRequest.
    from worker_server.llm.access import LlmAccess, MissingLlmKey

    if access is None:
        access = LlmAccess()
    resolve_key = access.key_resolver()
    specs = []
    for i, endpoint in enumerate(endpoints):
        where = f"{field}[{i}]"
        if not endpoint.model:
            raise InvalidLlmRequest(f"{where}.model must not be empty")
        cap = endpoint.max_concurrency or DEFAULT_ENDPOINT_CONCURRENCY
        if not 1 <= cap <= MAX_ENDPOINT_CONCURRENCY:
            raise InvalidLlmRequest(
                f"{where}.max_concurrency must be in 0..{MAX_ENDPOINT_CONCURRENCY} "
                f"(0 means {DEFAULT_ENDPOINT_CONCURRENCY}), got {endpoint.max_concurrency}"
            )
        server = endpoint.server or "openai"
        if server not in SERVERS:
            raise InvalidLlmRequest(
                f"{where}.server must be one of {', '.join(SERVERS)}, got {endpoint.server!r}"
            )
        batch_size = endpoint.batch_size or 1
        check_batch_size(batch_size, server, f"{where}.batch_size")
        base_url = normalise_base_url(endpoint.base_url, f"{where}.base_url")
        access.check_host(base_url, f"{where}.base_url")
        api_key = key_problem = ""
        if endpoint.api_key_env:
            try:
                api_key = resolve_key(endpoint.api_key_env, f"{where}.api_key_env")
            except MissingLlmKey as exc:
                if not missing_keys_ok:
                    raise
                key_problem = str(exc)
        specs.append(
            EndpointSpec(
                base_url=base_url,
                model=endpoint.model,
                max_concurrency=cap,
                api_key=api_key,
                server=server,
                api_key_env=endpoint.api_key_env,
                key_problem=key_problem,
                batch_size=batch_size,
            )
        )
    if not specs:
        raise InvalidLlmRequest(f"{field} must not be empty")
    return tuple(specs)


def check_batch_size(batch_size: int, server: str, field: str) -> None:
    """The one rule for an endpoint's batch size (the manager's config applies it too)."""
    if not 1 <= batch_size <= MAX_BATCH_SIZE:
        raise InvalidLlmRequest(f"{field} must be in 1..{MAX_BATCH_SIZE}, got {batch_size}")
    if batch_size > 1 and server not in BATCHING_SERVERS:
        raise InvalidLlmRequest(
            f"{field} must be 1 for a {server} server (it answers one prompt per request); "
            f"prompt arrays are for {' and '.join(BATCHING_SERVERS)}"
        )


def positive_seconds(value: float, default: float, field: str, maximum: float = 3600.0) -> float:
    """A timeout in seconds where 0 means the default."""
    if not math.isfinite(value) or value < 0 or value > maximum:
        raise InvalidLlmRequest(f"{field} must be in [0, {maximum:g}] (0 means {default:g})")
    return value or default
