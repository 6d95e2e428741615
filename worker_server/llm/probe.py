"""ProbeLlm: can this process reach each endpoint, and does it serve the model it should?"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from worker_server.llm.client import LlmClient, error_text
from worker_server.llm.http import HttpError
from worker_server.llm.protocol import MODELS_PATH, served_models
from worker_server.llm.spec import EndpointSpec


@dataclass(frozen=True)
class ProbeResult:
    base_url: str
    model: str
    ok: bool
    # Why not when not ok; a note when ok only by a lenient match (one model served, other name).
    error: str
    latency_s: float
    # What /v1/models listed (empty when it was not asked or did not answer).
    served_models: tuple[str, ...] = ()


async def probe_endpoint(
    client: LlmClient, spec: EndpointSpec, timeout_s: float, check_only: bool = False
) -> ProbeResult:
    started = time.perf_counter()
    url = f"{spec.base_url}{MODELS_PATH}"

    def result(ok: bool, error: str = "", models: tuple[str, ...] = ()) -> ProbeResult:
        if spec.api_key:  # a server may echo the key it refused
            error = error.replace(spec.api_key, "***")
        elapsed = time.perf_counter() - started
        return ProbeResult(spec.base_url, spec.model, ok, error, elapsed, models)

    if spec.key_problem:
        # Not sent: without its key the endpoint would refuse every request anyway.
        return result(False, spec.key_problem)
    if check_only:
        return result(True)
    try:
        async with asyncio.timeout(timeout_s):
            response = await client.get(spec, MODELS_PATH)
    except TimeoutError:
        return result(False, f"no answer from {url} within {timeout_s:g} s")
    except HttpError as exc:
        return result(False, str(exc))
    if response.status != 200:
        return result(False, f"HTTP {response.status} from {url}: {error_text(response)}")
    try:
        models = served_models(response.json())
    except ValueError:
        return result(False, f"{url} did not answer with an OpenAI model list")
    listed = tuple(models)
    if spec.model in models:
        return result(True, models=listed)
    if len(models) == 1:
        # llama.cpp's server lists its one model under the file path or alias it was started
        # with, and answers for it whatever name a request gives.
        return result(
            True,
            f"serves one model, {models[0]!r}: requests for {spec.model!r} go to it",
            listed,
        )
    names = ", ".join(repr(m) for m in models) or "nothing"
    return result(False, f"model {spec.model!r} not served (serves: {names})", listed)


async def probe(
    client: LlmClient, specs: tuple[EndpointSpec, ...], timeout_s: float, check_only: bool = False
) -> list[ProbeResult]:
    """Probe every endpoint; one that answers has its circuit breaker closed, so a run resumed
    after its endpoint was fixed does not wait out a cooldown learnt while it was down.
    `check_only`: only what this worker decides (API keys resolved), nothing is sent."""
    results = list(
        await asyncio.gather(*(probe_endpoint(client, s, timeout_s, check_only) for s in specs))
    )
    for result in results:
        if result.ok and not check_only:
            client.breaker(result.base_url, result.model).recovered()
    return results
