"""Personas from attributes: a template, or an OpenAI-compatible model prompted by a metaprompt.

Both work on a `SampledPopulation` and a set of agent rows, with no database or cluster state,
so persona generation can run on the manager or be spread across workers later.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

import httpx
import numpy as np

from backend.populations.config import PersonaConfig, template_fields
from backend.populations.sampling import SampledPopulation

LLM_TEMPERATURE = 0.7

Rows = Sequence[int] | np.ndarray


def _columns(template: str, sampled: SampledPopulation) -> list[tuple[str, np.ndarray, list]]:
    """(placeholder, integer column, labels by column value) for each placeholder used."""
    columns = []
    for field in dict.fromkeys(template_fields(template)):
        if field in sampled.codes:
            columns.append((field, sampled.codes[field], sampled.categories[field]))
        elif field.endswith("_value") and field[: -len("_value")] in sampled.values:
            columns.append((field, sampled.values[field[: -len("_value")]], None))
        else:
            raise KeyError(f"template placeholder {{{field}}} is not an attribute")
    return columns


def render_template(template: str, sampled: SampledPopulation, rows: Rows) -> list[str]:
    """The template filled in for each agent in `rows`.

    Agents sharing every attribute the template uses share a persona, so each distinct
    combination is formatted once and the results are gathered by index.
    """
    rows = np.asarray(rows, dtype=np.int64)
    columns = _columns(template, sampled)
    if not columns:
        return [template.format()] * len(rows)
    if len(rows) == 0:
        return []
    stacked = np.stack([column[rows].astype(np.int64) for _, column, _ in columns], axis=1)
    _, first_row_of, inverse = np.unique(
        _mixed_radix(stacked), return_index=True, return_inverse=True
    )
    texts = []
    for row in first_row_of.tolist():
        values = {}
        for (field, _, labels), value in zip(columns, stacked[row].tolist(), strict=True):
            values[field] = labels[value] if labels is not None else str(value)
        texts.append(template.format(**values))
    return np.asarray(texts, dtype=object)[inverse.reshape(-1)].tolist()


def _mixed_radix(stacked: np.ndarray) -> np.ndarray:
    """One int64 key per row that is equal exactly when the rows are equal."""
    low = stacked.min(axis=0)
    spans = stacked.max(axis=0) - low + 1
    if float(np.prod(spans.astype(np.float64))) < 2**62:
        key = np.zeros(len(stacked), dtype=np.int64)
        for j in range(stacked.shape[1]):
            key = key * spans[j] + (stacked[:, j] - low[j])
        return key
    # Too many combinations for one integer: rank the rows instead.
    _, inverse = np.unique(stacked, axis=0, return_inverse=True)
    return inverse.reshape(-1)


async def generate_llm_personas(
    persona: PersonaConfig,
    sampled: SampledPopulation,
    rows: Rows,
    client: httpx.AsyncClient | None = None,
    *,
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[list[str], int]:
    """Ask the model to write each agent's persona; return (personas, failures).

    One completion request per agent, at most `persona.max_concurrency` in flight. An agent whose
    request fails (HTTP error, timeout, bad or empty answer) gets the template persona instead
    and counts as a failure. The request seed is the population seed plus the agent's index.
    """
    if persona.metaprompt is None or persona.endpoint is None or persona.model is None:
        raise ValueError("llm personas need metaprompt, endpoint and model")
    rows = np.asarray(rows, dtype=np.int64)
    total = len(rows)
    prompts = render_template(persona.metaprompt, sampled, rows)
    personas: list[str | None] = [None] * total
    url = f"{persona.endpoint}/v1/completions"
    failures = 0
    done = 0
    next_index = 0

    async def complete(k: int) -> str | None:
        body = {
            "model": persona.model,
            "prompt": prompts[k],
            "max_tokens": persona.max_tokens,
            "temperature": LLM_TEMPERATURE,
            "seed": sampled.seed + int(rows[k]),
        }
        try:
            async with asyncio.timeout(persona.timeout_s):
                response = await http.post(url, json=body, timeout=persona.timeout_s)
                response.raise_for_status()
                text = response.json()["choices"][0]["text"]
        except (httpx.HTTPError, TimeoutError, ValueError, KeyError, IndexError, TypeError):
            return None
        return text.strip() if isinstance(text, str) and text.strip() else None

    async def drain() -> None:
        # A fixed pool of max_concurrency loops caps requests in flight without creating a
        # task (or a semaphore waiter) per agent, which matters at 10^6 agents.
        nonlocal failures, done, next_index
        while next_index < total:
            k = next_index
            next_index += 1
            text = await complete(k)
            if text is None:
                failures += 1
            personas[k] = text
            done += 1
            if on_progress is not None:
                on_progress(done, total)

    own_client = client is None
    if own_client:
        limit = persona.max_concurrency
        client = httpx.AsyncClient(
            limits=httpx.Limits(max_connections=limit, max_keepalive_connections=limit),
            timeout=persona.timeout_s,
        )
    http = client
    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(min(persona.max_concurrency, total)):
                group.create_task(drain())
    finally:
        if own_client:
            await client.aclose()

    if failures:
        missing = np.flatnonzero(np.fromiter((p is None for p in personas), bool, total))
        for k, text in zip(
            missing.tolist(), render_template(persona.template, sampled, rows[missing]), strict=True
        ):
            personas[k] = text
    return personas, failures
