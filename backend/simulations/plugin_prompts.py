"""The prompts a plugin's LLM agents were sent, rebuilt for transcripts: the plugin renders each
again (populace.plugin.Simulation.render, its one renderer) from the agent's view of the round,
made the way the workers made it: the agent's attributes and persona, what everyone heard after
the previous round (the plugin's feedback of its stored metrics) and what the agent's group
heard (the plugin's resolution of the previous round's stored decisions; resolve is pure).

Resolving a round reads all its decisions, so the groups of the last few rounds asked about are
kept (a page of transcripts is one round, or one agent over many).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import OrderedDict
from pathlib import Path

import numpy as np
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import Population
from backend.populations import graph as population_graph
from backend.simulations import store
from backend.simulations.config import SimulationConfig
from backend.simulations.environment import feedback_of
from backend.simulations.metrics_declared import declared_metrics, metric_values
from backend.simulations.outcome import resolve
from populace.plugin import AgentView, agent_numbers
from populace.registry import installed
from worker_server.llm.protocol import completion_prompt
from worker_server.llm.templates import number_text
from worker_server.rounds import randomness
from worker_server.rounds.plugin_round import STREAM_BASE, answer_constraint

log = logging.getLogger(__name__)

# (simulation id, round) -> what each group heard after that round; the last few asked about.
_GROUPS: OrderedDict[tuple[int, int], dict[str, np.ndarray]] = OrderedDict()
GROUPS_KEPT = 16


async def _groups_after(
    session: AsyncSession, simulation_id: int, number: int, config: SimulationConfig
) -> dict[str, np.ndarray]:
    key = (simulation_id, number)
    if key in _GROUPS:
        _GROUPS.move_to_end(key)
        return _GROUPS[key]
    actions = await store.kept_actions(session, simulation_id, number)
    simulation = installed().get(config.plugin.name).simulation
    resolved = await asyncio.to_thread(
        resolve, config.plugin.name, simulation, config.params, actions
    )
    _GROUPS[key] = resolved.groups
    while len(_GROUPS) > GROUPS_KEPT:
        _GROUPS.popitem(last=False)
    return resolved.groups


# (simulation id, round) -> every agent's value after that round; the last few asked about.
_VALUES: OrderedDict[tuple[int, int], np.ndarray] = OrderedDict()


async def _values_after(session: AsyncSession, simulation_id: int, number: int) -> np.ndarray:
    """Every agent's value after a kept round, by agent number (NaN: no valid action)."""
    key = (simulation_id, number)
    if key in _VALUES:
        _VALUES.move_to_end(key)
        return _VALUES[key]
    actions = await store.kept_actions(session, simulation_id, number)
    numbers = agent_numbers(actions.agent_ids)
    values = np.full(int(numbers.max()) + 1 if len(numbers) else 0, np.nan)
    values[numbers] = np.where(actions.valid, actions.values, np.nan)
    _VALUES[key] = values
    while len(_VALUES) > GROUPS_KEPT:
        _VALUES.popitem(last=False)
    return values


class PluginPrompts:
    """One plugin run's prompts, rebuilt (load the rounds first)."""

    def __init__(self, config: SimulationConfig, api: str) -> None:
        self.config = config
        self.api = api
        self.simulation = installed().get(config.plugin.name).simulation
        self.group_size = self.simulation.group_size(config.params)
        self.constraint = answer_constraint(self.simulation.action(config.params))
        self.heard: dict[int, dict[str, float]] = {}  # round -> what everyone heard before it
        self.groups: dict[int, dict[str, np.ndarray]] = {}  # round -> groups heard before it
        # A network simulation's: round -> every agent's value after the round before (by
        # number, NaN: none), and the population's graph file (None: gone, or complete).
        self.values_before: dict[int, np.ndarray] = {}
        self.graph_file: Path | None = None

    async def load(self, session: AsyncSession, simulation_id: int, rounds: set[int]) -> None:
        """What agents heard before each of these rounds."""
        name, params = self.config.plugin.name, self.config.params
        declared = declared_metrics(name)
        told: dict[str, float] = {}
        kept = {r.round: r for r in await store.all_rounds(session, simulation_id)}
        for number in range(1, max(rounds, default=0) + 1):
            self.heard[number] = told
            before = kept.get(number)
            if before is None:
                break
            metrics = metric_values(declared, before.metrics or {})
            heard = feedback_of(name, self.simulation, params, number, metrics)
            if heard is not None:
                told = heard.values
        if self.simulation.network:
            population = await session.get(Population, self.config.population_id)
            file = population_graph.file_of(population) if population is not None else None
            self.graph_file = file if file is not None and file.exists() else None
            for number in rounds:
                if number > 1:
                    self.values_before[number] = await _values_after(
                        session, simulation_id, number - 1
                    )
        if self.group_size:
            for number in rounds:
                if number > 1:
                    self.groups[number] = await _groups_after(
                        session, simulation_id, number - 1, self.config
                    )

    def render(
        self, round_number: int, agent_id: int, attributes: dict, persona: str
    ) -> tuple[str, str, str] | None:
        """(prompt, system, user) as sent, or None when the plugin cannot render it now."""
        group = {}
        if self.group_size and round_number in self.groups:
            at = int(agent_numbers(np.asarray([agent_id]))[0]) // self.group_size
            for name, values in self.groups[round_number].items():
                if at < len(values) and not math.isnan(values[at]):
                    group[name] = float(values[at])
        view = AgentView(
            round=round_number,
            persona=persona or "",
            attributes={k: "" if v is None else str(v) for k, v in attributes.items()},
            feedback=self.heard.get(round_number, {}),
            group=group,
            **self._drawn_and_heard(round_number, agent_id),
        )
        try:
            prompt = self.simulation.render(self.config.params, view)
        except Exception:  # the plugin's code: its round failed the same way, or it changed
            log.warning(
                "plugin %s cannot render a transcript's prompt",
                self.config.plugin.name,
                exc_info=True,
            )
            return None
        if self.api == "completions":
            return completion_prompt(prompt.system, prompt.user), prompt.system, prompt.user
        return f"system: {prompt.system}\n\nuser: {prompt.user}", prompt.system, prompt.user

    def _drawn_and_heard(self, round_number: int, agent_id: int) -> dict:
        """AgentView.draw, and a network simulation's .previous and .neighbours, as the worker
        made them (worker_server.rounds.plugin_round.PromptInputs)."""
        number = int(agent_numbers(np.asarray([agent_id]))[0])
        key = number if self.simulation.network else agent_id
        seed = self.config.seed or 0
        draw = randomness.uniforms(seed, round_number, STREAM_BASE, np.asarray([key]))
        fields: dict = {"draw": float(draw[0])}
        values = self.values_before.get(round_number)
        if not self.simulation.network or values is None:
            return fields
        own = float(values[number]) if number < len(values) else math.nan
        fields["previous"] = None if math.isnan(own) else own
        shown = max(0, int(type(self.simulation).prompt_neighbours))
        if self.graph_file is not None and shown:
            row = population_graph.rows_of(self.graph_file, np.asarray([number]))
            first = np.asarray(row.indices[:shown], dtype=np.int64)
            heard = values[first[first < len(values)]]
            fields["neighbours"] = tuple(float(v) for v in heard[~np.isnan(heard)])
        return fields

    def reason(self, response: str | None) -> str:
        """Why an LLM agent's answer in this plugin's run was invalid."""
        wanted = _wanted(self.simulation.action(self.config.params).describe())
        if response is None:
            return (
                f"no answer that is {wanted} (raw answers were not stored: launch with "
                "store_responses to see them)"
            )
        if response == "":
            return "no answer: the LLM request failed (see the round's LLM errors)"
        return f"the answer is not {wanted}"


def action_wanted(config: SimulationConfig) -> str:
    """What a plugin run's actions must be, in words (e.g. "one of go, stay")."""
    simulation = installed().get(config.plugin.name).simulation
    return _wanted(simulation.action(config.params).describe())


def _wanted(action: dict) -> str:
    """What an answer must be, in words, from the action's description."""
    if "options" in action:
        return "one of " + ", ".join(action["options"])
    if "true_label" in action:
        return f"{action['false_label']} or {action['true_label']}"
    whole = "whole " if action["kind"] == "integer" else ""
    return f"a {whole}number in [{number_text(action['low'])}, {number_text(action['high'])}]"
