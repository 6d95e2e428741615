"""The model the LLM reference games play with: `--llm BASE_URL --model NAME` (any
OpenAI-compatible endpoint, probed before anything is deployed) or `--llm local` (Gemma 3 270M
served by llama.cpp for the length of the suite)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import httpx

LOCAL = "local"
PROBE_TIMEOUT_S = 10.0


class LlmUnavailable(Exception):
    """One line for the user: the endpoint cannot be used, and how to fix it."""


@dataclass(frozen=True)
class LlmTarget:
    base_url: str
    model: str
    api: str  # "completions" for base models (Gemma 3 270M), "chat" for instruction-tuned ones
    server: str  # the endpoint's server kind (llama_cpp, vllm, openai)
    label: str  # how the report names the model

    def policy(self, temperature: float, **extra) -> dict:
        """The simulation's LLM policy: every agent asks (exchangeable reads would need the
        server's log-probabilities), at most two requests in flight (llama.cpp serves one at a
        time; two keep it busy)."""
        return {
            "kind": "llm",
            "endpoints": [
                {
                    "base_url": self.base_url,
                    "model": self.model,
                    "server": self.server,
                    "max_concurrency": 2,
                }
            ],
            "api": self.api,
            "temperature": temperature,
            "identical_prompts": "each_asks",
            **extra,
        }


def probe(base_url: str, model: str) -> None:
    """GET /v1/models: the endpoint answers and serves the model (llama.cpp serves any name)."""
    url = base_url.rstrip("/")
    url = url if url.endswith("/v1") else f"{url}/v1"
    try:
        answer = httpx.get(f"{url}/models", timeout=PROBE_TIMEOUT_S)
    except httpx.HTTPError as exc:
        raise LlmUnavailable(
            f"--llm {base_url} did not answer ({type(exc).__name__}): start the server, or "
            "pass --llm local to serve Gemma 3 270M here"
        ) from None
    if answer.status_code in (401, 403):
        raise LlmUnavailable(
            f"--llm {base_url} refused the request ({answer.status_code}): validate sends no "
            "API key; use an endpoint that needs none (e.g. a local vLLM or llama.cpp server)"
        )
    if answer.status_code != 200:
        raise LlmUnavailable(
            f"--llm {base_url} answered GET /v1/models with {answer.status_code}: is it an "
            "OpenAI-compatible server?"
        )
    try:
        served = [m["id"] for m in answer.json().get("data", [])]
    except (ValueError, AttributeError, KeyError, TypeError):
        raise LlmUnavailable(
            f"--llm {base_url}: GET /v1/models did not list models: is it an OpenAI-compatible "
            "server?"
        ) from None
    if served and model not in served and len(served) > 1:
        raise LlmUnavailable(
            f"--model {model} is not served by {base_url} (it serves {', '.join(served[:5])})"
        )


@contextlib.contextmanager
def open_llm(
    spec: str, model: str | None, api: str | None, say, server: str | None = None
) -> Iterator[LlmTarget]:
    """The endpoint for the games, ready to answer; a local server is stopped at the end.
    server: what serves a base URL (llama_cpp, vllm, openai: the default), so the answers are
    constrained as that server takes it."""
    if spec == LOCAL:
        from backend.llm_local import MODEL_ALIAS, LlmExtraMissing, LocalLlmFailed, start_local_llm
        from bench.cluster import free_port

        say("starting Gemma 3 270M on llama.cpp (--llm local)")
        try:
            server = start_local_llm(free_port())
        except LlmExtraMissing as exc:
            raise LlmUnavailable(f"--llm local: {exc}") from None
        except LocalLlmFailed as exc:
            raise LlmUnavailable(f"--llm local: the server did not start: {exc}") from None
        with server:
            yield LlmTarget(
                server.base_url, MODEL_ALIAS, api or "completions", "llama_cpp", "Gemma 3 270M"
            )
        return
    if not spec.startswith(("http://", "https://")):
        raise LlmUnavailable(
            f"--llm {spec}: give an endpoint's base URL (http://host:port/v1) or 'local'"
        )
    if not model:
        raise LlmUnavailable(f"--llm {spec} needs --model NAME: the model the endpoint serves")
    probe(spec, model)
    yield LlmTarget(spec, model, api or "chat", server or "openai", model)
