"""Transcripts: for an agent and a round, the prompt its worker sent, the raw answer (when the
run stored answers), the parsed value, and why an answer was invalid, late or lost.

Prompts are not stored (10^6 of them a round); they are rebuilt here with the workers' own
template code from what decides them: the run's stored config, the agent's attributes and
persona, the rounds' public outcomes and the agent's own earlier choices. A worker remembers
an agent's last `agent_memory_size` rounds (8 by default), and so does the rebuild; a worker
started with another memory size wrote older choices in or out accordingly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import Simulation
from backend.lifecycles import decision
from backend.populations import store as population_store
from backend.simulations import prompts
from backend.simulations import store as simulation_store
from backend.simulations.config import LlmPolicyConfig, SimulationConfig
from backend.simulations.plugin_prompts import PluginPrompts, action_wanted
from worker_server.llm.answers import parse_answer
from worker_server.llm.protocol import completion_prompt
from worker_server.llm.templates import Feedback, HistoryText, Template, number_text
from worker_server.settings import WorkerSettings

# What a worker remembers of each agent unless told otherwise (POPULACE_AGENT_MEMORY_SIZE).
DEFAULT_MEMORY = WorkerSettings.model_fields["agent_memory_size"].default


@dataclass(frozen=True)
class TranscriptRow:
    agent_id: int
    round: int
    status: str
    value: float | None
    response: str | None
    # The prompt as sent (the completions API's one text; the chat API's messages joined),
    # its system and user parts; None without an LLM.
    prompt: str | None
    system: str | None
    user: str | None
    reason: str | None
    attributes: dict[str, Any]


class PromptBuilder:
    """Rebuilds one run's prompts (None for a run without an LLM policy)."""

    def __init__(self, config: dict | SimulationConfig, memory_size: int = DEFAULT_MEMORY) -> None:
        self.memory_size = memory_size
        self.config: SimulationConfig | None
        try:
            self.config = SimulationConfig.model_validate(config)
        except ValidationError:  # a config stored by an older version
            self.config = None
        policy = self.config.llm_policy if self.config else None
        self.llm = isinstance(policy, LlmPolicyConfig)
        # A plugin's LLM agents answered the prompts it rendered: it renders them again.
        self.plugin: PluginPrompts | None = None
        if not self.llm:
            return
        assert self.config is not None and isinstance(policy, LlmPolicyConfig)
        if self.config.plays_plugin_round:
            self.plugin = PluginPrompts(self.config, policy.api)
            return
        texts = prompts.build(self.config.prompt, self.config.rule, policy.integer_answers)
        self.api = policy.api
        self.answer_mode = texts.answer_mode
        self.system, self.user = Template(texts.system), Template(texts.user)
        ratio, offset = self.config.rule.resolved
        self.base = {
            "min": number_text(self.config.rule.min),
            "max": number_text(self.config.rule.max),
            "ratio": f"{ratio:g}",
            "offset": f"{offset:g}",
            "history": "",
            "persona": "",
        }

    def render(
        self,
        round_number: int,
        attributes: dict[str, Any],
        persona: str,
        history: list[Feedback],
        choices: list[float],
    ) -> tuple[str, str, str] | None:
        """(prompt, system, user) for the agent in the round, or None without an LLM."""
        if not self.llm:
            return None
        values = {name: "" if v is None else str(v) for name, v in attributes.items()}
        values.update(self.base)  # the round's placeholders win over an attribute's name
        values["round"] = str(round_number)
        values["persona"] = persona
        if history:
            values["history"] = HistoryText(history).render(choices)
        system, user = self.system.render(values), self.user.render(values)
        if self.api == "completions":
            return completion_prompt(system, user), system, user
        return f"system: {system}\n\nuser: {user}", system, user

    def reason(self, status: str, response: str | None) -> str | None:
        """Why the agent has no valid number in the round (None when it has one)."""
        if status == decision.VALID:
            return None
        if status == decision.INVALID and self.plugin is not None:
            return self.plugin.reason(response)
        if status == decision.LOST:
            return "not hosted by a live worker during the round (the run allowed partial rounds)"
        config = self.config
        if status == decision.LATE:
            if config is not None and config.deadlines.agent_s:
                return f"no answer within the agent's deadline of {config.deadlines.agent_s:g} s"
            return "no answer before the round's deadline"
        if config is not None and not self.llm and config.plays_plugin_round:
            return f"the policy's value is not {action_wanted(config)}"
        if not self.llm or config is None:
            return "the policy gave no number in the game's range"
        low, high = config.rule.min, config.rule.max
        if response is None:
            return (
                f"no number in [{number_text(low)}, {number_text(high)}] (raw answers were not "
                "stored: launch with store_responses to see them)"
            )
        if response == "":
            return "no answer: the LLM request failed (see the round's LLM errors)"
        value = parse_answer(response, self.answer_mode)
        if math.isnan(value):
            return f"no number could be read from the answer ({self.answer_mode} prompt)"
        return f"the answer's number {number_text(value)} is outside [{number_text(low)}, " + (
            f"{number_text(high)}]"
        )


async def _history(
    session: AsyncSession, simulation_id: int, before_round: int, tell_mean: bool
) -> list[Feedback]:
    """The public outcomes the agents were told before `before_round`, oldest first."""
    rows = await simulation_store.told_outcomes(session, simulation_id, before_round)
    return [Feedback(r, w, m if tell_mean else None) for r, w, m in rows]


def _choices(
    history: list[Feedback],
    known: dict[tuple[int, int], tuple[float | None, str]],
    agent_id: int,
    memory_size: int,
) -> list[float]:
    """The agent's choice in each history round as a worker remembers it: the number, -inf for
    no valid answer, NaN when not played (lost) or too old to remember."""
    choices = [math.nan] * len(history)
    first_remembered = max(0, len(history) - memory_size)
    for i in range(first_remembered, len(history)):
        found = known.get((agent_id, history[i].round))
        if found is None or found[1] == decision.LOST:
            continue
        value, status = found
        choices[i] = float(value) if status == decision.VALID and value is not None else -math.inf
    return choices


async def _rows(
    session: AsyncSession,
    simulation: Simulation,
    decisions: list[tuple[int, int, float | None, str, str | None]],
    memory_size: int,
) -> list[TranscriptRow]:
    """Transcripts for (agent_id, round, value, status, response) rows of one simulation, in
    their order. A few queries per page, none per row."""
    builder = PromptBuilder(simulation.config, memory_size)
    agents = await population_store.agents_by_id(session, sorted({d[0] for d in decisions}))
    history: list[Feedback] = []
    known: dict[tuple[int, int], tuple[float | None, str]] = {}
    if builder.plugin is not None and decisions:
        await builder.plugin.load(session, simulation.id, {d[1] for d in decisions})
    elif builder.llm and decisions:
        tell_mean = bool(builder.config and builder.config.feedback.mean)
        history = await _history(session, simulation.id, max(d[1] for d in decisions), tell_mean)
        needed = set()
        for round_number in {d[1] for d in decisions}:
            told = [f.round for f in history if f.round < round_number]
            needed.update(told[-memory_size:] if memory_size else [])
        known = await simulation_store.decisions_at(
            session, simulation.id, sorted({d[0] for d in decisions}), sorted(needed)
        )
    out = []
    for agent_id, round_number, value, status, response in decisions:
        agent = agents.get(agent_id)
        attributes = dict(agent.attributes) if agent is not None else {}
        built = None
        if agent is not None and builder.plugin is not None:
            built = builder.plugin.render(round_number, agent_id, attributes, agent.persona)
        elif agent is not None:
            told = [f for f in history if f.round < round_number]
            choices = _choices(told, known, agent_id, memory_size)
            built = builder.render(round_number, attributes, agent.persona, told, choices)
        prompt, system, user = built or (None, None, None)
        out.append(
            TranscriptRow(
                agent_id=agent_id,
                round=round_number,
                status=status,
                value=None if value is None or math.isnan(value) else float(value),
                response=response,
                prompt=prompt,
                system=system,
                user=user,
                reason=builder.reason(status, response),
                attributes=attributes,
            )
        )
    return out


async def round_transcripts(
    session: AsyncSession,
    simulation: Simulation,
    round_number: int,
    *,
    status: str | None = None,
    attribute: tuple[str, Any] | None = None,
    value_min: float | None = None,
    value_max: float | None = None,
    after: int | None = None,
    limit: int = 50,
    memory_size: int = DEFAULT_MEMORY,
) -> tuple[list[TranscriptRow], int | None]:
    """A keyset page (by agent id) of one round's transcripts, filtered."""
    decisions, next_after = await simulation_store.round_decisions_page(
        session,
        simulation.id,
        round_number,
        status=status,
        agent_where=(
            population_store.attribute_equals(session, *attribute)
            if attribute is not None
            else None
        ),
        value_min=value_min,
        value_max=value_max,
        after=after,
        limit=limit,
    )
    rows = await _rows(session, simulation, decisions, memory_size)
    return rows, next_after


async def agent_transcripts(
    session: AsyncSession,
    simulation: Simulation,
    agent_id: int,
    *,
    after: int | None = None,
    limit: int = 50,
    memory_size: int = DEFAULT_MEMORY,
) -> tuple[list[TranscriptRow], int | None]:
    """A keyset page (by round) of one agent's transcripts in one simulation."""
    decisions, next_after = await simulation_store.agent_decisions_page(
        session, simulation.id, agent_id, after=after, limit=limit
    )
    rows = await _rows(session, simulation, decisions, memory_size)
    return rows, next_after
