"""Validated, plain descriptions of LLM endpoints and requests (built from the proto messages)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

# The rules live in endpoint_rules (shared with the manager); the worker's modules import
# InvalidLlmRequest and normalise_base_url from here too.
from worker_server.llm.endpoint_rules import (
    DEFAULT_PROCESS_CONCURRENCY,
    DEFAULT_SERVER,
    MAX_CONCURRENCY,
    SERVERS,
    InvalidLlmRequest,
    check_batch_size,
    normalise_base_url,
)

if TYPE_CHECKING:
    from worker_server.llm.access import LlmAccess

__all__ = [
    "EndpointSpec",
    "InvalidLlmRequest",
    "endpoint_specs",
    "normalise_base_url",
    "positive_seconds",
]


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
        cap = endpoint.max_concurrency or DEFAULT_PROCESS_CONCURRENCY
        if not 1 <= cap <= MAX_CONCURRENCY:
            raise InvalidLlmRequest(
                f"{where}.max_concurrency must be in 0..{MAX_CONCURRENCY} "
                f"(0 means {DEFAULT_PROCESS_CONCURRENCY}), got {endpoint.max_concurrency}"
            )
        server = endpoint.server or DEFAULT_SERVER
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


def positive_seconds(value: float, default: float, field: str, maximum: float = 3600.0) -> float:
    """A timeout in seconds where 0 means the default."""
    if not math.isfinite(value) or value < 0 or value > maximum:
        raise InvalidLlmRequest(f"{field} must be in [0, {maximum:g}] (0 means {default:g})")
    return value or default
