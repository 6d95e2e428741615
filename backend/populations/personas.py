"""Personas from attributes: a template, or an OpenAI-compatible model prompted by a metaprompt.

Templates render on the manager, once per distinct combination of the attributes they use. LLM
personas are written by the workers (GeneratePersonas), each for the share of agents placed on
it, so the requests leave every node in parallel.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from backend.populations.config import PersonaConfig, render_persona_template, template_fields
from backend.populations.sampling import SampledPopulation
from backend.workers.grpc_client import WorkerClient
from worker_server.rpc import worker_pb2 as pb

LLM_TEMPERATURE = 0.7
# Agents per GeneratePersonas call: replies stay a few MB and progress moves.
LLM_CALL_AGENTS = 5_000

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
        return [render_persona_template(template, {})] * len(rows)
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
        texts.append(render_persona_template(template, values))
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


def persona_columns(
    sampled: SampledPopulation, rows: slice, fields: Sequence[str]
) -> list[pb.AttributeColumn]:
    """The attributes the templates use, for agents `rows`, as dictionary-encoded columns.

    Numeric bin values ({age_value}) travel as their decimal strings, encoded the same way.
    """
    columns = []
    for name in dict.fromkeys(fields):
        if name in sampled.codes:
            columns.append(
                pb.AttributeColumn(
                    name=name,
                    categories=sampled.categories[name],
                    codes=sampled.codes[name][rows].tolist(),
                )
            )
        elif name.endswith("_value") and name[: -len("_value")] in sampled.values:
            values = sampled.values[name[: -len("_value")]][rows]
            unique, codes = np.unique(values, return_inverse=True)
            columns.append(
                pb.AttributeColumn(
                    name=name, categories=[str(v) for v in unique.tolist()], codes=codes.tolist()
                )
            )
        else:
            raise KeyError(f"template placeholder {{{name}}} is not an attribute")
    return columns


@dataclass
class PersonaShare:
    """A worker's slice of the population: agents [start, start + count)."""

    address: str
    start: int
    count: int


def _persona_endpoint(persona: PersonaConfig, cap: int) -> pb.LlmEndpoint:
    """The persona LLM as a worker sees it, with this worker's part of the concurrency cap."""
    return pb.LlmEndpoint(
        base_url=persona.endpoint,
        model=persona.model,
        max_concurrency=cap,
        server="openai",
        api_key_env=persona.api_key_env or "",
    )


def _persona_request(
    persona: PersonaConfig,
    sampled: SampledPopulation,
    fields: list[str],
    endpoint: pb.LlmEndpoint,
    start: int,
    stop: int,
) -> pb.GeneratePersonasRequest:
    """One call's worth of agents [start, stop), with the attributes their templates use."""
    return pb.GeneratePersonasRequest(
        endpoints=[endpoint],
        model=persona.model,
        metaprompt=persona.metaprompt,
        fallback_template=persona.template,
        attributes=persona_columns(sampled, slice(start, stop), fields),
        count=stop - start,
        max_tokens=persona.max_tokens,
        temperature=LLM_TEMPERATURE,
        timeout_s=persona.timeout_s,
        max_concurrency=endpoint.max_concurrency,
        seed=sampled.seed,
        first_index=start,
    )


async def generate_llm_personas(
    persona: PersonaConfig,
    sampled: SampledPopulation,
    shares: Sequence[PersonaShare],
    *,
    on_progress: Callable[[int, int], None] | None = None,
) -> tuple[list[str], int]:
    """Have each worker write the personas of its share with the LLM; return (personas, fallbacks).

    Workers run in parallel, each on at most its part of `persona.max_concurrency` requests (so
    the endpoint sees the configured cap in total), in calls of LLM_CALL_AGENTS agents so replies
    stay small and progress is reported. A worker falls back to the template per failed agent;
    the request seed of agent i is the population seed plus i wherever it is written.
    """
    if persona.metaprompt is None or persona.endpoint is None or persona.model is None:
        raise ValueError("llm personas need metaprompt, endpoint and model")
    fields = [*template_fields(persona.metaprompt), *template_fields(persona.template)]
    total = sum(share.count for share in shares)
    personas: list[str] = [""] * total
    done = fallbacks = 0

    async def write(share: PersonaShare) -> None:
        nonlocal done, fallbacks
        cap = max(1, persona.max_concurrency * share.count // max(1, total))
        endpoint = _persona_endpoint(persona, cap)
        async with WorkerClient(share.address) as client:
            for start in range(share.start, share.start + share.count, LLM_CALL_AGENTS):
                stop = min(start + LLM_CALL_AGENTS, share.start + share.count)
                request = _persona_request(persona, sampled, fields, endpoint, start, stop)
                # Every request may take its whole timeout, a cap's worth at a time.
                waves = -(-(stop - start) // cap)
                reply = await client.generate_personas(
                    request, timeout=persona.timeout_s * (waves + 1) + 30
                )
                personas[start:stop] = list(reply.personas)
                fallbacks += reply.n_fallback
                done += stop - start
                if on_progress is not None:
                    on_progress(done, total)

    async with asyncio.TaskGroup() as group:
        for share in shares:
            if share.count:
                group.create_task(write(share))
    return personas, fallbacks
