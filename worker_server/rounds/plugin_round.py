"""A round played by a simulation plugin's own rule-based policy (RunRoundRequest.plugin).

The worker finds the plugin in its registry like the manager does (never by import), checks it
has the manager's version, validates the params the manager sent with the plugin's own models,
and hands each cohort to the policy as an `Observation`: numpy columns, what everyone and what
each agent's group heard after the last round, the agents' attributes, and placement-independent
random streams. The action's type says which values are valid (the sub-environment counts the
rest invalid).

Played by the runtime's LLM policy instead, each agent answers the prompt the plugin renders
from its view (`plugin_prompts`), constrained to the action's type (`answer_constraint`).
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from pydantic import ValidationError

import worker_server.rounds.randomness as randomness
from populace.plugin import (
    LLM_POLICY,
    MAX_GROUPS,
    Action,
    AgentView,
    BooleanAction,
    ChoiceAction,
    IntegerAction,
    Neighbours,
    Observation,
    Params,
    PolicySupport,
    RulePolicy,
    Simulation,
    agent_numbers,
)
from populace.registry import installed
from worker_server.agents import Population
from worker_server.llm.answers import NumberConstraint
from worker_server.llm.constraints import AnswerConstraint, ChoiceConstraint
from worker_server.llm.templates import MAX_PROMPT_CHARS
from worker_server.rounds.chosen import chosen
from worker_server.rounds.errors import InvalidRound, PluginFailed
from worker_server.rounds.network import NetworkRound
from worker_server.rounds.policies import Cohort, Policy, RoundContext
from worker_server.rpc import worker_pb2 as pb

# Plugin policies' random streams start here, clear of the runtime's own (randomness.py).
STREAM_BASE = 1000
MAX_STREAM = 999
# A plugin's policy decides off the event loop, on threads of its own: however slow its code,
# the worker keeps serving and the round's deadline cuts it (its agents count late; the thread
# finishes its call and the answer is dropped). Few threads: numpy releases the GIL, and a
# plugin stuck for good holds these, never the loop's default executor.
_PLUGIN_CODE = ThreadPoolExecutor(max_workers=4, thread_name_prefix="plugin-policy")


@dataclass(frozen=True)
class PluginRound:
    """The plugin side of a round, validated."""

    name: str
    simulation: Simulation
    params: Params
    action: Action
    feedback: dict[str, float]
    groups: dict[str, np.ndarray]
    group_size: int | None
    # groups[name][0] is group group_offset's value (the manager sends a worker its span).
    group_offset: int = 0
    # Every policy it can be played with: its own and those other packages add (the registry's).
    policies: tuple[PolicySupport, ...] = ()
    # A network simulation's round: its agents' own and neighbours' values.
    network: NetworkRound | None = None

    def valid(self, values: np.ndarray) -> np.ndarray:
        return self.action.valid(values)

    @property
    def range(self) -> tuple[float, float]:
        return self.action.range

    @property
    def plays_llm(self) -> bool:
        """Whether the plugin lists the runtime's LLM policy (and so renders prompts)."""
        return any(p.name == LLM_POLICY for p in type(self.simulation).policies)

    def group_values(self, ids: np.ndarray) -> dict[str, np.ndarray]:
        """What each of these agents' groups heard after the last round (NaN: nothing yet)."""
        if not self.group_size:
            return {}
        at = agent_numbers(ids) // self.group_size - self.group_offset
        out = {}
        for name, values in self.groups.items():
            known = (at >= 0) & (at < len(values))
            picked = values[np.clip(at, 0, max(len(values) - 1, 0))] if len(values) else np.nan
            out[name] = np.where(known, picked, np.nan)
        return out


def _json_object(text: str, what: str) -> dict:
    try:
        value = json.loads(text or "{}")
    except ValueError as exc:
        raise InvalidRound(f"{what}: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise InvalidRound(f"{what}: a JSON object, not {type(value).__name__}")
    return value


def _invalid(what: str, exc: ValidationError) -> InvalidRound:
    first = exc.errors(include_url=False)[0]
    where = ".".join(str(part) for part in (what, *first["loc"]))
    return InvalidRound(f"{where}: {first['msg']}")


def _feedback(message: pb.PluginRound) -> dict[str, float]:
    """plugin.feedback_json: the previous round's feedback, every value a finite number."""
    feedback = {}
    for key, value in _json_object(message.feedback_json, "plugin.feedback_json").items():
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise InvalidRound(f"plugin.feedback_json.{key}: a finite number")
        feedback[key] = float(value)
    return feedback


def _groups(message: pb.PluginRound) -> dict[str, np.ndarray]:
    """plugin.groups: each named once, with at most MAX_GROUPS values."""
    groups = {}
    for i, given in enumerate(message.groups):
        if not given.name or given.name in groups:
            raise InvalidRound(f"plugin.groups[{i}].name: empty or given twice")
        if len(given.values) > MAX_GROUPS:
            raise InvalidRound(f"plugin.groups[{i}].values: more than {MAX_GROUPS}")
        groups[given.name] = np.asarray(given.values, dtype=np.float64)
    return groups


def plugin_round(message: pb.PluginRound, network: NetworkRound | None = None) -> PluginRound:
    """Validate RunRoundRequest.plugin (InvalidRound naming the field); `network` is the
    round's network side (RunRoundRequest.network), which a network simulation needs."""
    try:
        plugin = installed().get(message.name)
    except KeyError as exc:
        raise InvalidRound(f"plugin.name: {exc.args[0]}") from None
    if message.version and message.version != plugin.version:
        raise InvalidRound(
            f"plugin.version: the manager plays {message.name} {message.version}, this worker "
            f"has {plugin.version}"
        )
    simulation = plugin.simulation
    if type(simulation).network and network is None:
        raise InvalidRound(
            f"network: plugin {message.name!r} is a network simulation; the round must say who "
            "hosts which agents"
        )
    if network is not None and not type(simulation).network:
        raise InvalidRound(f"network: plugin {message.name!r} is not a network simulation")
    try:
        params = type(simulation).params.model_validate(
            _json_object(message.params_json, "plugin.params_json")
        )
    except ValidationError as exc:
        raise _invalid("plugin.params", exc) from None
    feedback = _feedback(message)
    groups = _groups(message)
    if not 0 <= message.group_offset <= MAX_GROUPS:
        raise InvalidRound(f"plugin.group_offset: in 0..{MAX_GROUPS}, not {message.group_offset}")
    try:
        action = simulation.action(params)
        group_size = simulation.group_size(params)
        if network is not None:
            network.pairing = bool(simulation.pairs_agents(params))
            complete_ok = bool(simulation.plays_complete_graph(params))
    except Exception as exc:  # the plugin's code: the manager's copy said these params were fine
        raise PluginFailed(
            f"plugin {message.name!r} cannot say its action for these params: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if network is not None and network.placement.complete and not complete_ok:
        raise InvalidRound(
            f"network.complete: plugin {message.name!r} cannot play a complete graph with these "
            "params (it needs a graph of edges)"
        )
    return PluginRound(
        name=message.name,
        simulation=simulation,
        params=params,
        action=action,
        feedback=feedback,
        groups=groups,
        group_size=group_size,
        group_offset=message.group_offset,
        policies=plugin.policies,
        network=network,
    )


class _Attributes(Mapping):
    """The cohort's attributes as category labels, made only for those a policy reads."""

    def __init__(self, population: Population, rows: np.ndarray) -> None:
        self._population, self._rows = population, rows

    def __getitem__(self, name: str) -> np.ndarray:
        attribute = self._population.attributes[name]
        labels = np.asarray([*attribute.categories, None], dtype=object)
        codes = attribute.codes[self._rows].astype(np.int64)
        return labels[np.minimum(codes, len(labels) - 1)]

    def __iter__(self) -> Iterator[str]:
        return iter(self._population.attributes)

    def __len__(self) -> int:
        return len(self._population.attributes)


@dataclass(frozen=True)
class PluginPolicy(Policy):
    """A plugin's rule-based policy, by its name, with its params."""

    round: PluginRound
    rule: RulePolicy
    policy_params: Params
    name: str
    kind: str = field(default="plugin", init=False)

    def check(self, population: Population) -> None:
        if self.round.network is not None:
            self.round.network.check(population)  # InvalidRound now, before any agent acts

    async def decide(self, cohort: Cohort, context: RoundContext) -> np.ndarray:
        ids = cohort.ids
        played = self.round
        network = {}
        if played.network is not None:
            view = await played.network.view(cohort.population)

            def seen():
                return (*view.observe(cohort.rows), view.partners(cohort.rows))

            loop = asyncio.get_running_loop()
            previous, streak, neighbours, partners = await loop.run_in_executor(_PLUGIN_CODE, seen)
            size = played.network.placement.size
            numbers = agent_numbers(ids)

            def pick(count: int, stream: int) -> np.ndarray:
                return chosen(context.seed, stream, numbers, size, count)

            network = dict(
                previous=previous,
                streak=streak,
                neighbours=neighbours,
                population_size=size,
                chosen=pick,
                partners=partners,
            )

        # A network simulation draws by agent number, not id: the same config and seed play
        # the same on any population deployed from them, as its graph is the same.
        keys = agent_numbers(ids) if played.network is not None else ids

        def uniforms(stream: int) -> np.ndarray:
            if not (isinstance(stream, int) and 0 <= stream <= MAX_STREAM):
                raise ValueError(f"uniforms: a stream number in 0..{MAX_STREAM}, not {stream!r}")
            return randomness.uniforms(context.seed, context.round, STREAM_BASE + stream, keys)

        observation = Observation(
            round=context.round,
            agent_ids=ids,
            feedback=played.feedback,
            group=played.group_values(ids),
            attributes=_Attributes(cohort.population, cohort.rows),
            uniforms=uniforms,
            **network,
        )
        try:
            values = await asyncio.get_running_loop().run_in_executor(
                _PLUGIN_CODE, self.rule.decide, played.params, self.policy_params, observation
            )
        except Exception as exc:  # the plugin's code: the round fails with its error
            raise PluginFailed(
                f"plugin {played.name!r} policy {self.name!r} failed: {type(exc).__name__}: {exc}"
            ) from exc
        return np.asarray(values, dtype=np.float64)


def plugin_policy(message: pb.PluginPolicy, played: PluginRound | None) -> PluginPolicy:
    if played is None:
        raise InvalidRound("policy.plugin: needs the round's plugin (RunRoundRequest.plugin)")
    declared = {p.name: p for p in played.policies}
    support = declared.get(message.name)
    if support is None or support.rule is None:
        known = ", ".join(sorted(n for n, p in declared.items() if p.rule is not None))
        raise InvalidRound(
            f"policy.plugin.name: plugin {played.name!r} has no rule-based policy "
            f"{message.name!r} (it has: {known or 'none'})"
        )
    try:
        params = support.rule.params.model_validate(
            _json_object(message.params_json, "policy.plugin.params_json")
        )
    except ValidationError as exc:
        raise _invalid("policy.plugin.params", exc) from None
    return PluginPolicy(played, support.rule(), params, message.name)


def answer_constraint(action: Action) -> AnswerConstraint:
    """What an LLM agent may answer for this action type, and how its reply becomes a value: a
    number in the range (whole for an integer action), or an option (its index; a boolean's
    false label is 0 and its true label 1)."""
    if isinstance(action, ChoiceAction):
        return ChoiceConstraint(tuple(action.options))
    if isinstance(action, BooleanAction):
        return ChoiceConstraint((action.false_label, action.true_label))
    low, high = action.range
    return NumberConstraint.for_range(low, high, isinstance(action, IntegerAction))


@dataclass(frozen=True)
class PromptInputs:
    """What a cohort's prompts show besides attributes, one entry per agent of the cohort:
    AgentView.draw, and for a network simulation .previous and .neighbours."""

    draws: np.ndarray
    previous: np.ndarray | None = None
    neighbours: Neighbours | None = None
    shown: int = 0  # neighbours shown per agent at most (Simulation.prompt_neighbours)

    def view_of(self, position: int) -> dict:
        """AgentView's fields from these inputs for the agent at `position` in the cohort."""
        fields: dict = {"draw": float(self.draws[position])}
        if self.previous is not None:
            own = float(self.previous[position])
            fields["previous"] = None if math.isnan(own) else own
        if self.neighbours is not None and self.shown:
            lo = int(self.neighbours.offsets[position])
            hi = min(int(self.neighbours.offsets[position + 1]), lo + self.shown)
            heard = self.neighbours.values_at(np.arange(lo, hi))
            fields["neighbours"] = tuple(float(v) for v in heard[~np.isnan(heard)])
        return fields


async def prompt_inputs(played: PluginRound, cohort: Cohort, context: RoundContext) -> PromptInputs:
    """The cohort's PromptInputs: the draws every agent's prompt may state (stream 0, as
    Observation.uniforms(0)), and a network simulation's values (the round's view, off the
    loop)."""
    network = played.network
    keys = agent_numbers(cohort.ids) if network is not None else cohort.ids
    draws = randomness.uniforms(context.seed, context.round, STREAM_BASE, keys)
    if network is None:
        return PromptInputs(draws)
    view = await network.view(cohort.population)
    loop = asyncio.get_running_loop()
    previous, _, neighbours = await loop.run_in_executor(_PLUGIN_CODE, view.observe, cohort.rows)
    shown = max(0, int(type(played.simulation).prompt_neighbours))
    return PromptInputs(draws, previous, neighbours, shown)


def plugin_prompts(
    played: PluginRound,
    cohort: Cohort,
    round_number: int,
    positions: np.ndarray,
    chunk: int,
    inputs: PromptInputs | None = None,
) -> Iterator[tuple[int, str, str]]:
    """(position, system prompt, user prompt) of each agent at `positions`, rendered by the
    plugin from the agent's view, `chunk` agents materialised at a time. A plugin that raises or
    renders a prompt over the limit fails the round with its name."""
    population = cohort.population
    attributes = list(population.attributes.values())
    personas = population.personas
    for start in range(0, len(positions), chunk):
        at = positions[start : start + chunk]
        rows = cohort.rows[at]
        groups = played.group_values(population.ids[rows])
        decoded = [(a.name, a.categories, a.missing, a.codes[rows].tolist()) for a in attributes]
        for k, (position, row) in enumerate(zip(at.tolist(), rows.tolist(), strict=True)):
            view = AgentView(
                round=round_number,
                persona=personas.text(row) if personas is not None else "",
                attributes={
                    name: "" if codes[k] == missing else categories[codes[k]]
                    for name, categories, missing, codes in decoded
                },
                feedback=played.feedback,
                group={
                    name: float(values[k])
                    for name, values in groups.items()
                    if not np.isnan(values[k])
                },
                **(inputs.view_of(position) if inputs is not None else {}),
            )
            try:
                prompt = played.simulation.render(played.params, view)
                system, user = prompt.system, prompt.user
            except Exception as exc:  # the plugin's code: the round fails with its error
                raise PluginFailed(
                    f"plugin {played.name!r} render failed: {type(exc).__name__}: {exc}"
                ) from exc
            if not (isinstance(system, str) and isinstance(user, str) and user.strip()):
                raise PluginFailed(f"plugin {played.name!r} render gave no user prompt")
            if len(system) + len(user) > MAX_PROMPT_CHARS:
                raise PluginFailed(
                    f"plugin {played.name!r} render gave a prompt of "
                    f"{len(system) + len(user):,} characters, over the limit of "
                    f"{MAX_PROMPT_CHARS:,}"
                )
            yield position, system, user
