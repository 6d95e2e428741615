"""Interviewing one hosted agent: a free-form question answered in character, streamed.

The manager sends what the worker does not have (the run's LLM settings, the rule, and the
agent's memory of the run as its store has it: every round, not only the few the worker keeps);
the worker adds what only it holds (the agent's persona and attributes), writes the prompt and
streams the answer from the run's LLM.

The models are base models served for completions (Gemma 3 270M on llama.cpp), so the prompt is
a transcript to continue: who the player is, the rules, what it remembers, then
"Interviewer: <question>\\nYou:". Generation stops where the model would start the
interviewer's next line. Chat endpoints get the same context as a system message and the
question as the user's.

The request goes through the process's LlmClient for a slot (the endpoint's cap and circuit
breaker hold for interviews as for rounds) but is sent on its own streamed connection
(worker_server.llm.streaming), with no retry: half an answer has already gone out.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from worker_server.agents import AgentStore
from worker_server.agents.columns import Agent
from worker_server.llm.client import CircuitOpen, LlmClient
from worker_server.llm.endpoint_rules import MAX_TEMPERATURE
from worker_server.llm.spec import InvalidLlmRequest, endpoint_specs, positive_seconds
from worker_server.llm.streaming import StreamFailed, stream_events
from worker_server.llm.templates import number_text
from worker_server.llm.usage import short_error
from worker_server.rpc import worker_pb2 as pb

MAX_QUESTION_CHARS = 2000
MAX_ANSWER_TOKENS = 256
DEFAULT_TIMEOUT_S = 120.0
SPEAKER = "Interviewer"
# Where a base model's answer is over: it starts the interviewer's next line, a new paragraph
# or a heading of its own (a small model goes on writing the document it thinks it is in).
STOP = [f"\n{SPEAKER}:", "\n\n", "\n#"]
# OpenAI and vLLM report usage in a last chunk only when asked; llama.cpp does not take it.
USAGE_OPTION_SERVERS = ("vllm", "openai")


class InvalidInterview(ValueError):
    """A malformed request; the message names the field."""


class AgentNotHosted(LookupError):
    pass


@dataclass(frozen=True)
class Memory:
    """One round of the agent's past, as the manager stored it."""

    round: int
    value: float | None
    status: str
    target: float | None = None
    winner: float | None = None


@dataclass(frozen=True)
class Rule:
    ratio: float
    offset: float
    min: float
    max: float


@dataclass(frozen=True)
class Delta:
    text: str


@dataclass(frozen=True)
class Finished:
    prompt: str
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str = ""


@dataclass(frozen=True)
class InterviewJob:
    """A validated interview: where it goes and the exact prompt."""

    client: LlmClient
    model: str
    specs: tuple
    api: str
    prompt: str  # the transcript sent (completions), or system + question as stored (chat)
    context: str
    question: str
    max_tokens: int
    temperature: float
    timeout_s: float


# -- the prompt ------------------------------------------------------------------------------


def ratio_text(ratio: float) -> str:
    """2/3 rather than 0.666667 when the ratio is a simple fraction."""
    fraction = Fraction(ratio).limit_denominator(100)
    if fraction.denominator > 1 and math.isclose(float(fraction), ratio, abs_tol=1e-9):
        return f"{fraction.numerator}/{fraction.denominator}"
    return number_text(ratio)


def rules_text(rule: Rule) -> str:
    target = f"{ratio_text(rule.ratio)} of the average of all reported numbers"
    if rule.offset:
        sign = "plus" if rule.offset > 0 else "minus"
        target = f"{number_text(abs(rule.offset))} {sign} {target}"
    return (
        f"Each player reports a number between {number_text(rule.min)} and "
        f"{number_text(rule.max)}. The winner is the player whose number is closest to "
        f"{target}. After each round every player is told the winning number."
    )


def memory_line(memory: Memory) -> str:
    """What the agent remembers of one round, in its own voice."""
    if memory.value is not None and memory.status == "valid":
        mine = f"I chose {number_text(memory.value)}"
    elif memory.status == "late":
        mine = "I did not answer in time"
    elif memory.status == "lost":
        mine = "I did not play"
    else:
        mine = "I gave no valid number"
    outcome = []
    if memory.target is not None:
        outcome.append(f"the target was {number_text(memory.target)}")
    if memory.winner is not None:
        outcome.append(f"the winning number was {number_text(memory.winner)}")
        if memory.value is not None and memory.status == "valid" and memory.value == memory.winner:
            outcome[-1] += ", so I won"
    line = f"Round {memory.round}: {mine}"
    return line + ("; " + " and ".join(outcome) if outcome else "") + "."


def who(agent: Agent) -> str:
    if agent.persona.strip():
        return agent.persona.strip()
    if agent.attributes:
        traits = ", ".join(f"{name}: {value}" for name, value in agent.attributes.items())
        return f"A player ({traits})."
    return "A player."


def interview_context(agent: Agent, rule: Rule, memory: list[Memory]) -> str:
    """Everything before the question: the player, the rules, its memory of the run."""
    remembered = "\n".join(map(memory_line, memory)) or "The game has not started yet."
    return (
        "The following is an interview with a player of a multiplayer number-guessing game. "
        "The player answers in character, in a few sentences.\n\n"
        f"# The player\n{who(agent)}\n\n"
        f"# The game\n{rules_text(rule)}\n\n"
        f"# What the player remembers of the game\n{remembered}\n"
    )


def transcript(context: str, question: str) -> str:
    return f"{context}\n{SPEAKER}: {question}\nYou:"


# -- the request -----------------------------------------------------------------------------


def _memory(request: pb.InterviewRequest) -> list[Memory]:
    out = []
    for i, m in enumerate(request.memory):
        numbers = [m.value if m.HasField("value") else None]
        numbers += [m.target if m.HasField("target") else None]
        numbers += [m.winner if m.HasField("winner") else None]
        if any(x is not None and not math.isfinite(x) for x in numbers):
            raise InvalidInterview(f"memory[{i}]: value, target and winner must be finite")
        out.append(Memory(m.round, numbers[0], m.status, numbers[1], numbers[2]))
    return out


def _model_of(llm: pb.LlmPolicy, agent: Agent) -> str:
    if llm.model_attribute and llm.model_by_category:
        category = agent.attributes.get(llm.model_attribute)
        return llm.model_by_category.get(category, llm.default_model)
    return llm.default_model


def find_agent(store: AgentStore, population_id: str, agent_id: int) -> Agent:
    population = store.population(population_id)
    if population is not None and len(population):
        rows, found = population.rows_of(np.array([agent_id], dtype=np.int64))
        if found[0]:
            return population.agents(rows)[0]
    raise AgentNotHosted(f"agent {agent_id} of population {population_id} is not hosted here")


def prepare(request: pb.InterviewRequest, store: AgentStore, client: LlmClient) -> InterviewJob:
    """Validate the request (InvalidInterview naming the field, AgentNotHosted) into a job."""
    question = request.question.strip()
    if not question:
        raise InvalidInterview("question must not be empty")
    if len(request.question) > MAX_QUESTION_CHARS:
        raise InvalidInterview(f"question must be at most {MAX_QUESTION_CHARS} characters")
    if not request.population_id:
        raise InvalidInterview("population_id must not be empty")
    if not 0 <= request.max_tokens <= MAX_ANSWER_TOKENS:
        raise InvalidInterview(
            f"max_tokens must be in 0..{MAX_ANSWER_TOKENS} (0 means {MAX_ANSWER_TOKENS})"
        )
    llm = request.llm
    if llm.api not in ("chat", "completions"):
        raise InvalidInterview(f"llm.api must be chat or completions, got {llm.api!r}")
    temperature = llm.temperature
    if not (math.isfinite(temperature) and 0 <= temperature <= MAX_TEMPERATURE):
        raise InvalidInterview(f"llm.temperature must be in [0, {MAX_TEMPERATURE:g}]")
    try:
        specs = endpoint_specs(llm.endpoints, "llm.endpoints", client.access)
        timeout_s = positive_seconds(request.timeout_s, DEFAULT_TIMEOUT_S, "timeout_s")
    except InvalidLlmRequest as exc:
        raise InvalidInterview(str(exc)) from None
    rule = request.rule
    if not all(map(math.isfinite, (rule.ratio, rule.offset, rule.min, rule.max))):
        raise InvalidInterview("rule: ratio, offset, min and max must be finite")
    memory = _memory(request)
    agent = find_agent(store, request.population_id, request.agent_id)
    model = _model_of(llm, agent)
    if model not in {spec.model for spec in specs}:
        raise InvalidInterview(f"model {model!r} is not served by any of llm.endpoints")
    context = interview_context(agent, Rule(rule.ratio, rule.offset, rule.min, rule.max), memory)
    prompt = (
        transcript(context, question)
        if llm.api == "completions"
        else f"[system]\n{context}\n[user]\n{question}"
    )
    return InterviewJob(
        client=client,
        model=model,
        specs=specs,
        api=llm.api,
        prompt=prompt,
        context=context,
        question=question,
        max_tokens=request.max_tokens or MAX_ANSWER_TOKENS,
        temperature=temperature,
        timeout_s=timeout_s,
    )


def request_body(job: InterviewJob, server: str) -> tuple[str, dict]:
    """The path and body of the streamed request for a server of this kind."""
    body: dict = {"model": job.model}
    if job.api == "completions":
        path = "/v1/completions"
        body["prompt"] = job.prompt
    else:
        path = "/v1/chat/completions"
        body["messages"] = [
            {"role": "system", "content": job.context},
            {"role": "user", "content": job.question},
        ]
    body |= {
        "max_tokens": job.max_tokens,
        "temperature": job.temperature,
        "stop": STOP,
        "stream": True,
    }
    if server in USAGE_OPTION_SERVERS:
        body["stream_options"] = {"include_usage": True}
    return path, body


def _delta_text(event: dict, api: str) -> str:
    choices = event.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return ""  # the usage chunk has no choices
    choice = choices[0]
    if api == "chat":
        delta = choice.get("delta") or choice.get("message") or {}
        text = delta.get("content") if isinstance(delta, dict) else None
    else:
        text = choice.get("text")
    return text if isinstance(text, str) else ""


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


async def answer(job: InterviewJob) -> AsyncIterator[Delta | Finished]:
    """Text deltas as the LLM streams them, then one Finished (with the error, if it failed:
    the deltas already sent stand)."""
    client = job.client
    route = client.routes(job.specs)[job.model]
    prompt_tokens = completion_tokens = counted = 0
    error = ""
    try:
        lane, ticket = await client.acquire(route)
    except CircuitOpen as exc:
        yield Finished(job.prompt, job.model, error=str(exc))
        return
    spec = lane.endpoint.spec
    path, body = request_body(job, lane.server)
    client.load.inflight_llm_calls += 1
    client.load.llm_requests += 1
    try:
        async with asyncio.timeout(job.timeout_s):
            async for event in stream_events(spec.base_url, path, body, api_key=spec.api_key):
                text = _delta_text(event, job.api)
                if text:
                    counted += 1
                    yield Delta(text)
                usage = event.get("usage")
                if isinstance(usage, dict):
                    prompt_tokens = _count(usage.get("prompt_tokens")) or prompt_tokens
                    completion_tokens = _count(usage.get("completion_tokens")) or completion_tokens
        lane.breaker.answered(ticket)
    except StreamFailed as exc:
        error = short_error(str(exc), spec.api_key)
        if exc.broken:
            lane.breaker.failed(ticket, time.monotonic(), error)
        else:
            lane.breaker.answered(ticket)
    except TimeoutError:
        error = f"no complete answer from {spec.base_url} within {job.timeout_s:g} s"
        lane.breaker.failed(ticket, time.monotonic(), error)
    except BaseException:  # cancelled: the caller went away
        lane.breaker.abandoned(ticket)
        raise
    finally:
        client.load.inflight_llm_calls -= 1
        client.release(lane.endpoint)
    # llama.cpp's server reports no usage when streaming: one event per generated token.
    yield Finished(
        job.prompt,
        job.model,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens or counted,
        error=error,
    )
