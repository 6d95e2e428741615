"""One agent's answer: ask the model, parse the number, maybe ask it to extract the number."""

from __future__ import annotations

import math
from dataclasses import dataclass

from worker_server.llm.answers import NumberConstraint, extraction_prompt, parse_answer
from worker_server.llm.client import LlmClient, LlmFailure, LlmTimeout, Route
from worker_server.llm.protocol import Generation
from worker_server.llm.usage import UsageTally

EXTRACTION_MAX_TOKENS = 16


@dataclass(frozen=True)
class AnswerSettings:
    api: str  # "chat" or "completions"
    answer_mode: str  # "basic" or "cot"
    max_tokens: int
    temperature: float
    timeout_s: float  # the agent's budget, retries and the extraction call included
    max_retries: int
    extraction_call: bool
    constraint: NumberConstraint


@dataclass
class Answer:
    value: float = math.nan  # NaN: no valid number
    text: str = ""  # the model's raw answer
    late: bool = False  # the budget ran out first
    error: bool = False  # the request failed after its retries
    prompt_tokens: int = 0
    completion_tokens: int = 0


async def answer(
    client: LlmClient,
    route: Route,
    settings: AnswerSettings,
    system: str,
    user: str,
    seed: int,
    usage: UsageTally | None = None,
) -> Answer:
    """Never raises for the model's or the network's faults: they become the Answer's flags
    (an endpoint whose circuit is open makes the answer an error at once). Requests are counted
    per endpoint in `usage`."""
    generation = Generation(
        api=settings.api,
        model=route.model,
        system=system,
        user=user,
        max_tokens=settings.max_tokens,
        temperature=settings.temperature,
        seed=seed,
        constraint=settings.constraint if settings.answer_mode == "basic" else None,
    )
    result = Answer()
    try:
        completion = await client.complete(
            route,
            generation,
            timeout_s=settings.timeout_s,
            max_retries=settings.max_retries,
            usage=usage,
        )
    except LlmTimeout as exc:
        result.late = True
        result.error = exc.failed_attempts > 0
        return result
    except LlmFailure:
        result.error = True
        return result
    result.text = completion.text
    result.prompt_tokens = completion.prompt_tokens
    result.completion_tokens = completion.completion_tokens
    result.value = parse_answer(completion.text, settings.answer_mode)
    if math.isnan(result.value) and settings.extraction_call and completion.text.strip():
        # The budget counts from the first slot; what is left of it is the extraction's.
        remaining = settings.timeout_s - completion.elapsed_s
        if remaining > 0:
            await _extract(client, route, settings, completion.text, seed, remaining, result, usage)
    return result


async def _extract(
    client: LlmClient,
    route: Route,
    settings: AnswerSettings,
    text: str,
    seed: int,
    timeout_s: float,
    result: Answer,
    usage: UsageTally | None,
) -> None:
    generation = Generation(
        api=settings.api,
        model=route.model,
        user=extraction_prompt(text),
        max_tokens=EXTRACTION_MAX_TOKENS,
        temperature=0.0,
        seed=seed,
        constraint=settings.constraint,
    )
    try:
        completion = await client.complete(
            route, generation, timeout_s=timeout_s, max_retries=settings.max_retries, usage=usage
        )
    except (LlmTimeout, LlmFailure):
        return  # the answer stays invalid: it came in time, it just had no number
    result.prompt_tokens += completion.prompt_tokens
    result.completion_tokens += completion.completion_tokens
    result.value = parse_answer(completion.text, "basic")
