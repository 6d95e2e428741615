"""Running one interview: check it can be asked, have the agent's worker answer, keep the row.

`open_interview` does everything that can refuse the request before a response starts (unknown
agent or run, an agent outside the run's population, a run without an LLM, no live worker
hosting the agent, the worker refusing) and raises InterviewRefused (409), WorkerSilent (503)
or Invalid (422), which backend.api.errors answers.
The worker is asked at once and its first chunk awaited, so "not hosted after all" is a 409
too, not a broken stream.

From then on the answer is consumed by a task the app owns, not by the response: the row is
created as the worker accepts (status answering) and finished as answered or failed when the
worker's stream ends, whether or not the client is still reading. The response reads the task's
events from a queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

import numpy as np
from pydantic import ValidationError

from backend.db.models import Interview
from backend.errors import Conflict, DomainError, Invalid, Unavailable
from backend.interviews import store
from backend.populations import store as population_store
from backend.runtime import Runtime
from backend.simulations import store as simulation_store
from backend.simulations.config import LlmPolicyConfig, SimulationConfig
from backend.simulations.mixture import assignment_of
from backend.simulations.spec import llm_policy
from backend.workers.grpc_client import WorkerClient
from backend.workers.plane_errors import WorkerNotHosting, WorkerPlaneError, WorkerRefused
from populace.plugin import agent_numbers
from worker_server.rounds.assignment import AttributeAssignment
from worker_server.rpc import worker_pb2 as pb

log = logging.getLogger(__name__)

MAX_QUESTION_CHARS = 2000
MAX_ANSWER_TOKENS = 256
# The worker's own deadline for the answer, and ours for its stream a little later.
ANSWER_TIMEOUT_S = 180.0
STREAM_GRACE_S = 30.0


class InterviewRefused(Conflict):
    """The interview cannot start in the run's or the agent's current state."""


class WorkerSilent(Unavailable):
    """The agent's worker did not answer the interview."""


@dataclass(frozen=True)
class Delta:
    text: str


@dataclass(frozen=True)
class Done:
    interview: Interview


def worker_request(
    config: SimulationConfig, policy: LlmPolicyConfig, agent_id: int, question: str, memory
) -> pb.InterviewRequest:
    ratio, offset = config.rule.resolved
    return pb.InterviewRequest(
        population_id=str(config.population_id),
        agent_id=agent_id,
        question=question,
        llm=llm_policy(config, policy),
        rule=pb.GameRule(ratio=ratio, offset=offset, min=config.rule.min, max=config.rule.max),
        memory=[
            pb.InterviewMemory(
                round=m.round,
                value=m.value,
                status=m.status,
                target=m.target,
                winner=m.winner_value,
            )
            for m in memory
        ],
        max_tokens=MAX_ANSWER_TOKENS,
        timeout_s=ANSWER_TIMEOUT_S,
    )


def _llm_config(simulation) -> tuple[SimulationConfig, LlmPolicyConfig]:
    try:
        config = SimulationConfig.model_validate(simulation.config)
    except ValidationError:
        raise InterviewRefused(
            f"simulation {simulation.id}'s stored config is no longer valid"
        ) from None
    if config.plays_plugin_round:
        raise InterviewRefused(
            f"simulation {simulation.id} plays plugin {config.plugin.name!r}: interviews are "
            "of the guessing game's agents for now"
        )
    if config.llm_policy is None:
        raise InterviewRefused(
            f"simulation {simulation.id} has no LLM policy (its agents are "
            f"{config.policy.kind}): only agents of an LLM run can be interviewed",
        )
    return config, config.llm_policy


def _check_plays_llm(config: SimulationConfig, simulation, agent, population_size: int) -> None:
    """In a mixed run, only the LLM part's agents can be interviewed (the others followed a
    rule: there is no one to ask)."""
    assignment = assignment_of(config, simulation.seed, population_size)
    if assignment is None:
        return
    if isinstance(assignment, AttributeAssignment):
        category = (agent.attributes or {}).get(assignment.attribute)
        part = assignment.by_category.get(str(category), assignment.default)
    else:
        part = int(assignment.parts(agent_numbers(np.array([agent.id])))[0])
    played = config.policy_parts[part]
    if not isinstance(played.policy, LlmPolicyConfig):
        raise InterviewRefused(
            f"agent {agent.id} played {played.label!r} in simulation {simulation.id}, not its "
            "LLM part: only the LLM part's agents can be interviewed"
        )


def _worker_refusal(exc: WorkerPlaneError, address: str) -> DomainError:
    if isinstance(exc, WorkerNotHosting):
        return InterviewRefused(f"the agent is not hosted by its worker {address}: {exc.message}")
    if isinstance(exc, WorkerRefused):
        return InterviewRefused(f"worker {address} refuses the interview: {exc.message}")
    return WorkerSilent(f"worker {address} did not answer: {exc.status} {exc.message}")


async def open_interview(
    runtime: Runtime, agent_id: int, simulation_id: int, question: str
) -> AsyncIterator[Delta | Done]:
    """The interview's events (deltas, then Done) once the worker has accepted it; raises
    InterviewRefused, WorkerSilent, Invalid, UnknownAgent or UnknownSimulation before anything
    is stored."""
    async with runtime.sessionmaker() as session:
        agent = await population_store.get_agent(session, agent_id)
        simulation = await simulation_store.get_simulation(session, simulation_id)
        if simulation.population_id != agent.population_id:
            raise Invalid(
                f"agent {agent_id} is in population {agent.population_id}, "
                f"simulation {simulation_id} ran population {simulation.population_id}",
                loc=("body", "simulation_id"),
            )
        config, policy = _llm_config(simulation)
        population = await population_store.get_population(session, agent.population_id)
        _check_plays_llm(config, simulation, agent, population.size)
        address = await store.live_address(session, agent.worker_id)
        if address is None:
            raise InterviewRefused(
                f"agent {agent_id} is not hosted by a live worker: deploy it again or wait"
            )
        memory = await store.remembered_rounds(session, simulation_id, agent_id)
    request = worker_request(config, policy, agent_id, question, memory)
    client = WorkerClient(address)
    call = client.interview(request, timeout=ANSWER_TIMEOUT_S + STREAM_GRACE_S)
    try:
        first = await call.read()
    except WorkerPlaneError as exc:
        await client.close()
        raise _worker_refusal(exc, address) from None
    except BaseException:
        call.cancel()
        await client.close()
        raise
    async with runtime.sessionmaker() as session:
        row = await store.create_interview(session, simulation_id, agent_id, question)
    events: asyncio.Queue[Delta | Done | None] = asyncio.Queue()
    runtime.spawn(_consume(runtime, row.id, client, call, first, events))
    return _drain(events)


async def _consume(
    runtime: Runtime, interview_id: int, client, call, first, events: asyncio.Queue
) -> None:
    """Read the worker's stream to its end and finish the row, whoever is listening."""
    answer: list[str] = []
    final = None
    error = ""
    try:
        chunk = first
        while chunk is not None:  # None: the stream ended
            if chunk.done:
                final = chunk
                break
            if chunk.text:
                answer.append(chunk.text)
                events.put_nowait(Delta(chunk.text))
            chunk = await call.read()
        if final is None:
            error = "the worker ended the answer without its last chunk"
        else:
            error = final.error
    except WorkerPlaneError as exc:
        error = f"the worker's stream failed: {exc.status} {exc.message}".strip()
    except asyncio.CancelledError:
        error = "the manager stopped before the answer was complete"
        call.cancel()
    finally:
        with contextlib.suppress(Exception):
            await client.close()
        try:
            async with runtime.sessionmaker() as session:
                row = await store.finish_interview(
                    session,
                    interview_id,
                    answer="".join(answer),
                    prompt=final.prompt if final is not None else "",
                    model=final.model if final is not None else "",
                    prompt_tokens=final.prompt_tokens if final is not None else 0,
                    completion_tokens=final.completion_tokens if final is not None else 0,
                    error=error or None,
                )
            events.put_nowait(Done(row))
        except Exception:
            log.exception("interview %s: could not store its end", interview_id)
            events.put_nowait(None)


async def _drain(events: asyncio.Queue) -> AsyncIterator[Delta | Done]:
    while True:
        event = await events.get()
        if event is None:
            raise RuntimeError("the interview could not be stored")
        yield event
        if isinstance(event, Done):
            return
