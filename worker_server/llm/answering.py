"""An agent's answer: ask the model, parse the number, maybe ask it to extract the number.

`answer` asks for one agent; `answer_batch` for several in one request (a prompt array on the
completions API). A batch shares one request, so one budget, one retry schedule and one fate:
if the request fails or runs out of time, every agent of the batch is an error or late. Its
token counts are the request's, carried by the batch's first answer so that sums stay right.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass

from worker_server.llm.client import LlmClient, LlmFailure, LlmTimeout, Route
from worker_server.llm.constraints import AnswerConstraint
from worker_server.llm.protocol import Generation, completion_prompt
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
    constraint: AnswerConstraint  # the answer's shape, and how a reply is parsed


@dataclass
class Answer:
    value: float = math.nan  # NaN: no valid answer (a choice's value is its option's index)
    text: str = ""  # the model's raw answer
    late: bool = False  # the budget ran out first
    error: bool = False  # the request failed after its retries
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # of prompt_tokens, taken from the server's prefix cache


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
    generation = _generation(route, settings, seed, api=settings.api, system=system, user=user)
    (result,) = await _ask(client, route, settings, generation, usage)
    return result


async def answer_batch(
    client: LlmClient,
    route: Route,
    settings: AnswerSettings,
    prompts: list[tuple[str, str]],
    seed: int,
    usage: UsageTally | None = None,
) -> list[Answer]:
    """One Answer per (system, user) prompt, from one completions request carrying them all
    with one `seed` (the API has one per request). Never raises, like `answer`."""
    if len(prompts) == 1:
        system, user = prompts[0]
        return [await answer(client, route, settings, system, user, seed, usage)]
    joined = tuple(completion_prompt(system, user) for system, user in prompts)
    generation = _generation(route, settings, seed, api="completions", user="", prompts=joined)
    return await _ask(client, route, settings, generation, usage)


def _generation(route: Route, settings: AnswerSettings, seed: int, **prompt) -> Generation:
    constraint = settings.constraint if settings.answer_mode == "basic" else None
    return Generation(
        model=route.model,
        max_tokens=settings.max_tokens,
        temperature=settings.temperature,
        seed=seed,
        constraint=constraint,
        **prompt,
    )


async def _ask(
    client: LlmClient,
    route: Route,
    settings: AnswerSettings,
    generation: Generation,
    usage: UsageTally | None,
) -> list[Answer]:
    """One Answer per prompt of the request (module docstring: one budget, one fate)."""
    results = [Answer() for _ in range(generation.size)]
    try:
        completion = await client.complete(
            route,
            generation,
            timeout_s=settings.timeout_s,
            max_retries=settings.max_retries,
            usage=usage,
        )
    except LlmTimeout as exc:
        for result in results:
            result.late = True
            result.error = exc.failed_attempts > 0
        return results
    except LlmFailure:
        for result in results:
            result.error = True
        return results
    first = results[0]
    first.prompt_tokens = completion.prompt_tokens
    first.completion_tokens = completion.completion_tokens
    first.cached_tokens = completion.cached_tokens
    for result, choice in zip(results, completion.choices, strict=True):
        result.text = choice.text
        result.value = settings.constraint.parse(choice.text, settings.answer_mode)
    if settings.extraction_call:
        # The budget counts from the request's first slot; the extractions share what is left.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + settings.timeout_s - completion.elapsed_s
        for result in results:
            if math.isnan(result.value) and result.text.strip():
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                await _extract(
                    client, route, settings, result.text, generation.seed, remaining, result, usage
                )
    return results


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
        user=settings.constraint.extraction_prompt(text),
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
        return  # the answer stays invalid: it came in time, it just had no valid answer
    result.prompt_tokens += completion.prompt_tokens
    result.completion_tokens += completion.completion_tokens
    result.value = settings.constraint.parse(completion.text, "basic")
