"""The rules of an LLM endpoint and of the requests sent to it: one owner for the manager and the
workers.

The manager's config (backend.simulations.config) validates a REST body with them, the worker
(worker_server.llm.spec, worker_server.rounds.wire) validates the gRPC request with them, and the
dashboard reads them from frontend/src/generated/rules.ts, which scripts/gen_rules.py writes from
this module (tests/unit/test_rules_fresh.py fails when it is stale). Plain constants and checks
only: workers install light (no FastAPI, no SQLAlchemy).
"""

from __future__ import annotations

from typing import Literal, get_args
from urllib.parse import urlsplit

ServerKind = Literal["vllm", "llama_cpp", "openai"]
SERVERS: tuple[str, ...] = get_args(ServerKind)
DEFAULT_SERVER: ServerKind = "openai"
# "completions" for base models (e.g. Gemma 3 270M on llama.cpp).
Api = Literal["chat", "completions"]
APIS: tuple[str, ...] = get_args(Api)
DEFAULT_API: Api = "chat"
AnswerMode = Literal["basic", "cot"]
ANSWER_MODES: tuple[str, ...] = get_args(AnswerMode)

# Prompt arrays: vLLM and OpenAI take several prompts in one /v1/completions request;
# llama.cpp answers one prompt per request, and a chat request carries one conversation.
BATCHING_SERVERS = ("vllm", "openai")
MAX_BATCH_SIZE = 1024
# Prompts per request with the completions API when the config does not say: vLLM takes
# prompt arrays and batches them on the GPU anyway; "openai" may be any compatible server,
# many of which take one prompt only; llama.cpp answers one at a time.
DEFAULT_BATCH_SIZE: dict[str, int] = {"vllm": 16, "openai": 1, "llama_cpp": 1}

# Requests in flight to one endpoint in total when the config does not say: enough to keep a
# GPU server's batch full (vLLM schedules up to 256 sequences at once by default), a few for a
# hosted API, and one waiting behind the one being answered for llama.cpp (one at a time).
DEFAULT_TOTAL_CONCURRENCY: dict[str, int] = {"vllm": 256, "openai": 64, "llama_cpp": 2}
# One worker process's cap when a request says 0 (the manager always sends each its share).
DEFAULT_PROCESS_CONCURRENCY = 16
MAX_CONCURRENCY = 100_000

MAX_BASE_URL_CHARS = 2000
MAX_MODEL_CHARS = 500
# US dollars per million tokens (the meters' cost estimates).
MAX_PRICE_PER_MILLION = 1_000_000

# Tokens of one answer when the config says none: a number, or a chain of thought and a number.
DEFAULT_MAX_TOKENS: dict[str, int] = {"basic": 16, "cot": 512}
MAX_TOKENS = 32_768
DEFAULT_TEMPERATURE = 0.7
MAX_TEMPERATURE = 2.0
DEFAULT_MAX_RETRIES = 2
MAX_RETRIES = 10

# One agent's answer, retries included (the LLM request timeout on the workers).
DEFAULT_AGENT_DEADLINE_S = 30.0
MAX_AGENT_DEADLINE_S = 3600.0
# The whole round on each worker (none by default).
MAX_ROUND_DEADLINE_S = 7 * 24 * 3600.0


class InvalidLlmRequest(ValueError):
    """A request naming bad LLM settings; the message names the field."""


def default_concurrency_text() -> str:
    """ "vllm 256, openai 64, llama_cpp 2": the defaults by server, for help texts."""
    return ", ".join(f"{k} {v}" for k, v in DEFAULT_TOTAL_CONCURRENCY.items())


def default_batch_size_text() -> str:
    return ", ".join(f"{k} {v}" for k, v in DEFAULT_BATCH_SIZE.items())


def check_batch_size(batch_size: int, server: str, field: str) -> None:
    """The one rule for an endpoint's batch size (the manager's config applies it too)."""
    if not 1 <= batch_size <= MAX_BATCH_SIZE:
        raise InvalidLlmRequest(f"{field} must be in 1..{MAX_BATCH_SIZE}, got {batch_size}")
    if batch_size > 1 and server not in BATCHING_SERVERS:
        raise InvalidLlmRequest(
            f"{field} must be 1 for a {server} server (it answers one prompt per request); "
            f"prompt arrays are for {' and '.join(BATCHING_SERVERS)}"
        )


def normalise_base_url(base_url: str, field: str) -> str:
    """An endpoint's base URL without a trailing "/" or "/v1" (request paths are /v1/...)."""
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


def rules_for_clients() -> dict[str, object]:
    """The rules a client (the dashboard) needs, as JSON-able values."""
    return {
        "SERVERS": list(SERVERS),
        "DEFAULT_SERVER": DEFAULT_SERVER,
        "APIS": list(APIS),
        "DEFAULT_API": DEFAULT_API,
        "BATCHING_SERVERS": list(BATCHING_SERVERS),
        "MAX_BATCH_SIZE": MAX_BATCH_SIZE,
        "DEFAULT_BATCH_SIZE": DEFAULT_BATCH_SIZE,
        "DEFAULT_TOTAL_CONCURRENCY": DEFAULT_TOTAL_CONCURRENCY,
        "MAX_CONCURRENCY": MAX_CONCURRENCY,
        "MAX_PRICE_PER_MILLION": MAX_PRICE_PER_MILLION,
        "DEFAULT_MAX_TOKENS": DEFAULT_MAX_TOKENS,
        "MAX_TOKENS": MAX_TOKENS,
        "DEFAULT_TEMPERATURE": DEFAULT_TEMPERATURE,
        "MAX_TEMPERATURE": MAX_TEMPERATURE,
        "DEFAULT_AGENT_DEADLINE_S": DEFAULT_AGENT_DEADLINE_S,
        "MAX_AGENT_DEADLINE_S": MAX_AGENT_DEADLINE_S,
        "MAX_ROUND_DEADLINE_S": MAX_ROUND_DEADLINE_S,
    }
