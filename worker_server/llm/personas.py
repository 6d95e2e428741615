"""GeneratePersonas: write personas for a slice of a population with an LLM (the metaprompt).

Each agent's metaprompt is rendered from its attribute columns ({name} placeholders only) and
sent to the completions API with seed + first_index + i, so a persona does not depend on which
worker wrote it. A failed request (HTTP error, timeout, empty text) falls back to the rendered
fallback template and is counted. Requests in flight: at most max_concurrency (0: the
endpoints' caps), and never past an endpoint's cap.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from worker_server.llm.access import LlmAccess
from worker_server.llm.client import LlmClient, LlmFailure, LlmTimeout
from worker_server.llm.endpoint_rules import MAX_TOKENS
from worker_server.llm.protocol import Generation
from worker_server.llm.spec import (
    EndpointSpec,
    InvalidLlmRequest,
    endpoint_specs,
    positive_seconds,
)
from worker_server.llm.templates import MAX_PERSONA_CHARS, MAX_PROMPT_CHARS, Template, too_long

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_MAX_TOKENS = 256
MAX_COUNT = 1_000_000
# Transient faults (a 429 under load) deserve another try before the template takes over.
RETRIES = 2


@dataclass(frozen=True)
class PersonaJob:
    endpoints: tuple[EndpointSpec, ...]
    model: str
    metaprompt: Template
    fallback: Template
    # name -> (categories, codes): agent i has categories[codes[i]].
    columns: dict[str, tuple[tuple[str, ...], np.ndarray]]
    count: int
    max_tokens: int
    temperature: float
    timeout_s: float
    max_concurrency: int  # 0: the endpoints' caps
    seed: int
    first_index: int

    def values(self, i: int) -> dict[str, str]:
        return {name: categories[codes[i]] for name, (categories, codes) in self.columns.items()}


@dataclass
class PersonasResult:
    personas: list[str]
    n_fallback: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


def persona_job(request, access: LlmAccess | None = None) -> PersonaJob:
    """Validate a GeneratePersonasRequest (InvalidLlmRequest naming the field) under this
    worker's LLM access rules (allowed hosts, API key variables)."""
    endpoints = endpoint_specs(request.endpoints, access=access)
    served = sorted({e.model for e in endpoints})
    if not request.model:
        raise InvalidLlmRequest("model must not be empty")
    if request.model not in served:
        raise InvalidLlmRequest(
            f"model {request.model!r} is not served by any endpoint (served: {', '.join(served)})"
        )
    if not request.metaprompt.strip():
        raise InvalidLlmRequest("metaprompt must not be empty")
    if not 0 <= request.count <= MAX_COUNT:
        raise InvalidLlmRequest(f"count must be in 0..{MAX_COUNT}, got {request.count}")
    columns = _attribute_columns(request)
    metaprompt, fallback = Template(request.metaprompt), Template(request.fallback_template)
    metaprompt.check(columns, "metaprompt")
    fallback.check(columns, "fallback_template")
    # Bounded before any request: what the attributes could make of each template.
    value_chars = {name: max(map(len, labels), default=0) for name, (labels, _) in columns.items()}
    for template, field, limit in (
        (metaprompt, "metaprompt", MAX_PROMPT_CHARS),
        (fallback, "fallback_template", MAX_PERSONA_CHARS),
    ):
        longest = template.longest(value_chars)
        if longest > limit:
            raise InvalidLlmRequest(f"{field}: {too_long(field, longest, limit)}")
    if not 0 <= request.max_tokens <= MAX_TOKENS:
        raise InvalidLlmRequest(
            f"max_tokens must be in 0..{MAX_TOKENS} (0 means {DEFAULT_MAX_TOKENS})"
        )
    if not (math.isfinite(request.temperature) and 0 <= request.temperature <= 2):
        raise InvalidLlmRequest("temperature must be in [0, 2]")
    if request.max_concurrency < 0:
        raise InvalidLlmRequest("max_concurrency must be >= 0 (0 means the endpoints' caps)")
    return PersonaJob(
        endpoints=endpoints,
        model=request.model,
        metaprompt=metaprompt,
        fallback=fallback,
        columns=columns,
        count=request.count,
        max_tokens=request.max_tokens or DEFAULT_MAX_TOKENS,
        temperature=request.temperature,
        timeout_s=positive_seconds(request.timeout_s, DEFAULT_TIMEOUT_S, "timeout_s"),
        max_concurrency=request.max_concurrency,
        seed=request.seed,
        first_index=request.first_index,
    )


def _attribute_columns(request) -> dict[str, tuple[tuple[str, ...], np.ndarray]]:
    """The request's attributes, one (categories, codes) column per name, each code in range."""
    columns: dict[str, tuple[tuple[str, ...], np.ndarray]] = {}
    for i, column in enumerate(request.attributes):
        where = f"attributes[{i}] ({column.name!r})"
        if not column.name:
            raise InvalidLlmRequest(f"attributes[{i}].name must not be empty")
        if column.name in columns:
            raise InvalidLlmRequest(f"{where}: the attribute is given twice")
        codes = np.asarray(column.codes, dtype=np.int64)
        if len(codes) != request.count:
            raise InvalidLlmRequest(
                f"{where}: {len(codes)} codes for count {request.count} (one per agent)"
            )
        if len(codes) and int(codes.max()) >= len(column.categories):
            bad = int(np.argmax(codes >= len(column.categories)))
            raise InvalidLlmRequest(
                f"{where}.codes[{bad}] = {int(codes[bad])} is out of range "
                f"({len(column.categories)} categories)"
            )
        columns[column.name] = (tuple(column.categories), codes)
    return columns


async def generate_personas(client: LlmClient, job: PersonaJob) -> PersonasResult:
    route = client.routes(job.endpoints)[job.model]
    result = PersonasResult(personas=[""] * job.count)
    indices: Iterator[int] = iter(range(job.count))

    async def runner() -> None:
        for i in indices:  # shared: each runner takes the next agent
            values = job.values(i)
            generation = Generation(
                api="completions",
                model=job.model,
                user=job.metaprompt.render(values),
                max_tokens=job.max_tokens,
                temperature=job.temperature,
                seed=job.seed + job.first_index + i,
            )
            text = ""
            try:
                completion = await client.complete(
                    route, generation, timeout_s=job.timeout_s, max_retries=RETRIES
                )
            except (LlmFailure, LlmTimeout):
                pass
            else:
                # max_tokens bounds tokens, not characters: a persona keeps to the limit.
                text = completion.text.strip()[:MAX_PERSONA_CHARS]
                result.prompt_tokens += completion.prompt_tokens
                result.completion_tokens += completion.completion_tokens
            if not text:
                text = job.fallback.render(values)
                result.n_fallback += 1
            result.personas[i] = text

    runners = min(job.count, job.max_concurrency or route.capacity)
    tasks = [asyncio.create_task(runner()) for _ in range(runners)]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return result
