"""The public plugin interface: everything a simulation plugin declares, and nothing else.

A plugin is a class derived from `Simulation`, registered under the entry-point group
`populace.simulations` of its package (the entry-point name is the plugin's name):

    [project.entry-points."populace.simulations"]
    my_game = "my_package.game:MyGame"

It declares its params (a pydantic model: its JSON Schema drives the launch form, the CLI and
REST validation), the type of an agent's action (`NumberAction`, `IntegerAction`,
`ChoiceAction`, `BooleanAction`), the metrics a round reports (`Metric`) and the policies it
supports: its own rule-based ones (`RulePolicy`), and the runtime's LLM policy
(`llm_policy()`) when it renders prompts (`render`). Another package may add a rule-based policy to
any simulation (`PolicyEntry`, under the entry-point group `populace.policies`). The manager and every worker find plugins the same way (populace.registry) and never
import one by name.

Its environment is three pure functions the manager calls, so a run's state never lives in the
plugin object and a resumed run rebuilds it from the stored rounds alone:

- `resolve(params, actions)`: the round's metrics (and the agents it singles out) from every
  agent's action, in agent id order;
- `feedback(params, metrics)`: what every agent hears before the next round, from a round's
  metrics only (None: nothing new, the last feedback stands);
- `stop(params, history)`: a reason to end the run early, from every kept round's metrics.

The runtime adds a generic stop rule of its own over any declared metric (the launch's
`stop_when_converged`), on the metric `convergence_metric` names unless the launch names another.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import PydanticCustomError

NAME = r"^[a-z][a-z0-9_]{0,63}$"
PLUGIN_ERROR_TYPE = "plugin_params"


class Params(BaseModel):
    """Base of a plugin's params: unknown keys are refused (a typo is a 422, not a default)."""

    model_config = ConfigDict(extra="forbid")


def raise_invalid(title: str, problems: list[tuple[tuple[str | int, ...], str, Any]]) -> None:
    """Raise one ValidationError with an entry per (loc, message, input): for checks that span
    fields, so the 422 still names the field (e.g. ("rule", "max"))."""
    if problems:
        raise ValidationError.from_exception_data(
            title,
            [
                # The message goes in the context so braces in it are never formatted.
                {
                    "type": PydanticCustomError(PLUGIN_ERROR_TYPE, "{reason}", {"reason": msg}),
                    "loc": loc,
                    "input": value,
                }
                for loc, msg, value in problems
            ],
        )


# -- actions -------------------------------------------------------------------------------------
# An action travels and is stored as a float (the fast path at 10^6 agents): a number is itself,
# an integer too, a choice is its option's index, a boolean 0 or 1. NaN is "no valid action".


@dataclass(frozen=True)
class NumberAction:
    """A real number in [low, high]."""

    low: float
    high: float
    kind: ClassVar[str] = "number"

    def __post_init__(self) -> None:
        if not (math.isfinite(self.low) and math.isfinite(self.high) and self.low < self.high):
            raise ValueError(
                f"a number action needs finite low < high, not {self.low}..{self.high}"
            )

    @property
    def range(self) -> tuple[float, float]:
        """The smallest and largest value the action may take (as it travels: a float)."""
        return float(self.low), float(self.high)

    def valid(self, values: np.ndarray) -> np.ndarray:
        return (values >= self.low) & (values <= self.high)  # NaN compares False

    def describe(self) -> dict:
        return {"kind": self.kind, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class IntegerAction:
    """A whole number in [low, high]."""

    low: int
    high: int
    kind: ClassVar[str] = "integer"

    def __post_init__(self) -> None:
        if not self.low < self.high:
            raise ValueError(f"an integer action needs low < high, not {self.low}..{self.high}")

    @property
    def range(self) -> tuple[float, float]:
        return float(self.low), float(self.high)

    def valid(self, values: np.ndarray) -> np.ndarray:
        return (values >= self.low) & (values <= self.high) & (np.floor(values) == values)

    def describe(self) -> dict:
        return {"kind": self.kind, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class ChoiceAction:
    """One of named options; the value is the option's index."""

    options: tuple[str, ...]
    kind: ClassVar[str] = "choice"

    def __post_init__(self) -> None:
        folded = [o.casefold() for o in self.options]
        if len(folded) < 2 or len(set(folded)) != len(folded):
            raise ValueError("a choice needs at least two options that differ (ignoring case)")
        for option in self.options:
            if not option or option != option.strip() or not option.isprintable():
                raise ValueError(f"option {option!r}: printable text without outer spaces")

    @property
    def range(self) -> tuple[float, float]:
        return 0.0, float(len(self.options) - 1)

    def valid(self, values: np.ndarray) -> np.ndarray:
        return (values >= 0) & (values < len(self.options)) & (np.floor(values) == values)

    def option(self, value: float) -> str:
        return self.options[int(value)]

    def describe(self) -> dict:
        return {"kind": self.kind, "options": list(self.options)}


@dataclass(frozen=True)
class BooleanAction:
    """Yes or no; the value is 1 or 0. The labels are what an LLM answers."""

    true_label: str = "yes"
    false_label: str = "no"
    kind: ClassVar[str] = "boolean"

    def __post_init__(self) -> None:
        ChoiceAction((self.false_label, self.true_label))  # the same rules as options

    @property
    def range(self) -> tuple[float, float]:
        return 0.0, 1.0

    def valid(self, values: np.ndarray) -> np.ndarray:
        return (values == 0) | (values == 1)

    def describe(self) -> dict:
        return {"kind": self.kind, "true_label": self.true_label, "false_label": self.false_label}


Action = NumberAction | IntegerAction | ChoiceAction | BooleanAction


# -- metrics -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Metric:
    """A per-round figure the simulation reports: stored with the round, carried on its
    event, charted, exported and compared by name, with no code of the plugin's in the UI."""

    name: str
    title: str
    type: Literal["number", "integer"] = "number"
    unit: str = ""
    description: str = ""

    def __post_init__(self) -> None:
        if not re.fullmatch(NAME, self.name):
            raise ValueError(f"metric name {self.name!r}: lower case, digits and _, from a letter")

    def describe(self) -> dict:
        return {
            "name": self.name,
            "title": self.title,
            "type": self.type,
            "unit": self.unit,
            "description": self.description,
        }


# -- a round's actions and their resolution -----------------------------------------------------

# What became of an agent in a round (RoundActions.status).
VALID, INVALID, LATE, LOST = 0, 1, 2, 3
STATUS_NAMES = ("valid", "invalid", "late", "lost")

MetricValue = float | int | None


@dataclass(frozen=True)
class RoundActions:
    """Every agent's action in a round, as numpy columns in agent id order (never one object
    per agent): an action is valid for its type, invalid (unreadable or out of range), late (the
    deadline cut it) or lost (no live worker hosted the agent, with allow_partial)."""

    round: int
    agent_ids: np.ndarray  # int64, ascending
    values: np.ndarray  # float64, the action's value (ActionType); NaN unless valid
    status: np.ndarray  # uint8: VALID, INVALID, LATE or LOST
    # The last round's metrics ({} in round 1): for figures of change, e.g. new infections.
    previous_metrics: Mapping[str, MetricValue] = field(default_factory=dict)
    # The last round's group metrics (Resolution.group_metrics; {} in round 1): a group's
    # figure that carries over, e.g. the round it reached consensus.
    previous_group_metrics: Mapping[str, np.ndarray] = field(default_factory=dict)
    # A network simulation on a population with a graph: each agent's group, its connected
    # component (numbered 0, 1, ... by the component's lowest agent), aligned with agent_ids.
    groups: np.ndarray | None = None

    @property
    def valid(self) -> np.ndarray:
        return self.status == VALID

    def count(self, status: int) -> int:
        return int(np.count_nonzero(self.status == status))


@dataclass(frozen=True)
class Resolution:
    """What a round came to: a value (or None: no value this round) for every declared metric,
    the agents it singles out by role (e.g. the winners), the first few by id, and for a
    simulation played in groups, what each group's agents hear before the next round: one
    float64 array per name, indexed by group (group g holds the agents numbered
    g * group_size ... (g + 1) * group_size - 1 in their population)."""

    metrics: Mapping[str, MetricValue]
    agents: Mapping[str, Sequence[int]] = field(default_factory=dict)
    groups: Mapping[str, np.ndarray] = field(default_factory=dict)
    # The declared group metrics (Simulation.group_metrics): one float64 array per name, one
    # value per group (NaN: none), groups numbered as RoundActions.groups (a network
    # simulation's components) or by group_size. Kept with the round and served per group.
    group_metrics: Mapping[str, np.ndarray] = field(default_factory=dict)


# What one round may tell the groups, values per name: 10^7 agents in groups of two.
MAX_GROUPS = 5_000_000


def agent_numbers(agent_ids: np.ndarray) -> np.ndarray:
    """Each agent's number in its population (0, 1, ...): the low 32 bits of its id."""
    return np.asarray(agent_ids, dtype=np.int64) & 0xFFFFFFFF


# -- what an agent sees, and rule-based policies -------------------------------------------------


@dataclass(frozen=True)
class Observation:
    """What a cohort of agents sees before it acts, one row per agent (numpy, never one object
    per agent): a rule-based policy decides for the whole cohort from it at once."""

    round: int
    agent_ids: np.ndarray  # int64
    # What every agent heard after the last round (the plugin's feedback); {} before round 1.
    feedback: Mapping[str, float]
    # What each agent's group heard after the last round, one value per agent of the cohort
    # (NaN before round 1); {} for a simulation not played in groups.
    group: Mapping[str, np.ndarray]
    # name -> each agent's category (text), for the population's attributes.
    attributes: Mapping[str, np.ndarray]
    # Uniform numbers in [0, 1), one per agent, from a stream the policy numbers (0-999): the
    # same for an agent whatever worker hosts it and whatever cohort it is in.
    uniforms: Callable[[int], np.ndarray]
    # For a network simulation (Simulation.network): each agent's own public value after the
    # last round (its action; NaN before round 1 or when it had no valid action) and for how
    # many rounds in a row it has held that value (0 before round 1).
    previous: np.ndarray | None = None
    streak: np.ndarray | None = None
    # Its neighbours in the population's graph and their public values after the last round.
    neighbours: Neighbours | None = None
    # Agents in the population (all of them, not this cohort's).
    population_size: int = 0
    # chosen(count, stream): True for the agents among exactly `count` of the whole population
    # picked by a seeded draw of their own (stream 0-999): the same agents whatever the
    # placement, e.g. an epidemic's first infected.
    chosen: Callable[[int, int], np.ndarray] | None = None
    # For a simulation that pairs agents (Simulation.pairs_agents): whom each agent meets this
    # round and that partner's public value after the last round.
    partners: Partners | None = None

    @property
    def numbers(self) -> np.ndarray:
        return agent_numbers(self.agent_ids)

    def require_neighbours(self) -> Neighbours:
        """The cohort's neighbours, for a network simulation's policy (the runtime always gives
        them one); ValueError saying so when called without (e.g. in a plugin's own test)."""
        if self.neighbours is None or self.previous is None:
            raise ValueError("a network simulation's policy needs a population with a graph")
        return self.neighbours


class NeighbourValues(Protocol):
    """Where a runtime's Neighbours read their values from (a plugin never implements it): the
    runtime answers without gathering every entry when it can, e.g. counting only around the
    few agents that hold a rare value."""

    def gather(self) -> np.ndarray:
        """Every entry's value, aligned with Neighbours.numbers."""
        ...

    def at(self, positions: np.ndarray) -> np.ndarray:
        """The values of these entries (positions into Neighbours.numbers)."""
        ...

    def count_of(self, value: float) -> np.ndarray:
        """Per agent of the cohort, how many neighbours hold exactly `value` (int64)."""
        ...


class Neighbours:
    """A cohort's neighbours in the population's graph, as one CSR block over the cohort (never
    an object per agent): agent i's neighbours are numbers[offsets[i]:offsets[i + 1]] (their
    numbers in the population, ascending), and values[...] are those neighbours' public values
    after the last round (NaN before round 1, or for a neighbour with no valid action).

    The runtime gathers `values` at its first use (about ten entries an agent on a sparse
    graph): a policy that needs only some of them says so with `values_at` or `count_of`, which
    touch only what they need. A plugin's own test passes `values` directly."""

    def __init__(
        self,
        offsets: np.ndarray,
        numbers: np.ndarray,
        values: np.ndarray | None = None,
        *,
        source: NeighbourValues | None = None,
    ) -> None:
        if (values is None) == (source is None):
            raise ValueError("Neighbours: give values, or a source to read them from (not both)")
        self.offsets = offsets  # int64, one more than the cohort's agents
        self.numbers = numbers  # int64
        self._values = values
        self._source = source
        self._owner: np.ndarray | None = None

    @property
    def values(self) -> np.ndarray:
        """float64, aligned with numbers (gathered once, at the first use)."""
        if self._values is None:
            self._values = self._source.gather()
        return self._values

    @property
    def degree(self) -> np.ndarray:
        """Each agent's number of neighbours."""
        return np.diff(self.offsets)

    def owner(self) -> np.ndarray:
        """For each entry of numbers/values, the cohort position of the agent it neighbours
        (computed once per block: sum, count and a plugin's own code share it)."""
        if self._owner is None:
            self._owner = np.repeat(np.arange(len(self.offsets) - 1), self.degree)
        return self._owner

    def sum(self, per_edge: np.ndarray) -> np.ndarray:
        """Per agent, the sum of per_edge (aligned with numbers) over its neighbours."""
        return np.bincount(self.owner(), weights=per_edge, minlength=len(self.offsets) - 1).astype(
            np.float64
        )

    def count(self, per_edge: np.ndarray) -> np.ndarray:
        """Per agent, how many of its neighbours have per_edge True."""
        return np.bincount(
            self.owner(), weights=np.asarray(per_edge, dtype=bool), minlength=len(self.offsets) - 1
        ).astype(np.int64)

    def count_of(self, value: float) -> np.ndarray:
        """Per agent, how many of its neighbours hold exactly `value` after the last round: the
        same as count(values == value), but the runtime counts around the agents that hold it
        only (an epidemic's infectious few), never gathering every entry."""
        if self._values is None:
            return np.asarray(self._source.count_of(float(value)), dtype=np.int64)
        return self.count(self._values == value)

    def values_at(self, positions: np.ndarray) -> np.ndarray:
        """The values of these entries (positions into numbers, e.g. from pick); NaN where a
        position is -1. Reads only those entries, not every neighbour's."""
        positions = np.asarray(positions, dtype=np.int64)
        out = np.full(len(positions), np.nan)
        picked = positions >= 0
        if picked.any():
            at = positions[picked]
            out[picked] = self._values[at] if self._values is not None else self._source.at(at)
        return out

    def pick(self, uniforms: np.ndarray) -> np.ndarray:
        """One neighbour per agent, uniformly, from one uniform number in [0, 1) per agent: the
        position in numbers/values of the chosen neighbour, or -1 for an agent with none."""
        degree = self.degree
        at = self.offsets[:-1] + np.minimum(
            (np.asarray(uniforms) * degree).astype(np.int64), np.maximum(degree - 1, 0)
        )
        return np.where(degree > 0, at, -1)


@dataclass(frozen=True)
class Partners:
    """Whom each agent of a cohort meets this round, for a simulation that pairs agents
    (Simulation.pairs_agents). Each agent is in at most one pair, and pairs are symmetric: if u
    meets v, v meets u (maybe in another cohort or on another process, deciding alike). On a
    graph the pairs are a random matching along its edges, drawn afresh each round; on a
    complete graph, random pairs of the whole population (with an odd count, one agent sits
    out). Round 1 pairs nobody: there are no values before it. The pairs depend on the seed,
    the round and the graph alone, never on the placement."""

    numbers: np.ndarray  # int64, the partner's agent number; -1: no partner this round
    values: np.ndarray  # float64, the partner's public value after the last round (NaN: none)

    @property
    def matched(self) -> np.ndarray:
        """True for the agents that have a partner this round."""
        return self.numbers >= 0


class RulePolicy:
    """A rule-based policy, vectorised over a cohort: derive one, declare its params, and list
    it in the simulation's `policies` (PolicySupport(..., rule=MyPolicy))."""

    params: ClassVar[type[Params]] = Params

    def decide(self, params: Params, policy: Params, observation: Observation) -> np.ndarray:
        """One float64 action value per agent of the observation, in its order (NaN: none)."""
        raise NotImplementedError


# -- what an LLM agent is asked -------------------------------------------------------------------


@dataclass(frozen=True)
class AgentView:
    """What one agent knows before it acts, for an LLM policy's prompt: text and numbers, no
    numpy (an LLM agent costs a request; rendering its prompt is not the hot path)."""

    round: int
    persona: str  # "" when the population has none
    attributes: Mapping[str, str]  # name -> the agent's category ("" when it has none)
    feedback: Mapping[str, float]  # what everyone heard after the last round; {} before round 1
    group: Mapping[str, float]  # what this agent's group heard; {} before round 1 or ungrouped
    # A uniform number in [0, 1) for this agent and round from the run's seed: what
    # Observation.uniforms(0) gives the agent (e.g. a starting opinion the prompt states, so an
    # LLM variant starts where the rule-based one does); 0.5 where no run draws (estimates).
    draw: float = 0.5
    # A network simulation's: the agent's own value after the last round (None before round 1
    # or without a valid action), and the valid values of its first Simulation.
    # prompt_neighbours neighbours in the graph's order after the last round.
    previous: float | None = None
    neighbours: tuple[float, ...] = ()


@dataclass(frozen=True)
class Prompt:
    """An LLM agent's prompt. Put what every agent shares first (the rules, the round) and the
    agent's own part last: servers reuse the cache of a shared prefix. End the user prompt with
    the instruction and an answer cue; the runtime constrains the answer to the action's type
    (a number in its range, one of the options) and parses it."""

    system: str
    user: str


# The runtime's LLM policy, available to a simulation that renders prompts (Simulation.render).
LLM_POLICY = "llm"


def llm_policy(description: str = "a language model answers for each agent") -> PolicySupport:
    """The runtime's LLM policy, to list in a simulation's `policies`."""
    return PolicySupport(LLM_POLICY, "LLM", description, uses_llm=True)


# Values handed to math.fsum per step of exact_sum.
SUM_STEP = 1 << 14


def exact_sum(values: np.ndarray) -> float:
    """The correctly rounded sum of float64 values: it does not depend on their order, so a
    metric built on it is the same however the agents were spread over workers.

    Fed to math.fsum a slice at a time: fsum and tolist hold the GIL throughout, and resolve runs
    in a thread beside the manager's event loop, which must get the GIL back within a
    millisecond or so, not after 10^6 values."""

    def floats():
        for start in range(0, len(values), SUM_STEP):
            # The loop's jump back is where the interpreter may hand the GIL over.
            yield from values[start : start + SUM_STEP].tolist()

    return math.fsum(floats())


# -- the simulation ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PolicySupport:
    """A policy the simulation can be played with, by its name: a rule-based one the plugin
    writes (`rule`), or one the runtime provides (the guessing game's level-k, synthetic and
    LLM policies)."""

    name: str
    title: str
    description: str = ""
    uses_llm: bool = False  # asks LLM endpoints (the launch checks they answer)
    rule: type[RulePolicy] | None = None

    @property
    def vectorised(self) -> bool:
        return not self.uses_llm


@dataclass(frozen=True)
class PolicyEntry:
    """A rule-based policy a package adds to a simulation it does not own (another author's
    plugin, or a built-in), registered under the entry-point group `populace.policies`; the
    entry-point name is the policy's name:

        [project.entry-points."populace.policies"]
        contrarian = "my_package.policies:CONTRARIAN"   # PolicyEntry("el_farol", PolicySupport(...))

    It is offered beside the simulation's own policies wherever those are (the launch form, the
    CLI, GET /api/plugins), and a launch checks that every host of the population has it."""

    simulation: str  # the plugin's name (its entry-point name in populace.simulations)
    policy: PolicySupport


class Simulation:
    """Derive one per simulation; the class attributes are its declaration."""

    title: ClassVar[str]
    description: ClassVar[str] = ""
    params: ClassVar[type[Params]] = Params
    metrics: ClassVar[tuple[Metric, ...]] = ()
    # Figures per group each round (Resolution.group_metrics), for a simulation whose agents
    # form groups (a network simulation's connected components, or group_size groups): kept
    # with the round, served by GET /api/simulations/{id}/groups and its export.
    group_metrics: ClassVar[tuple[Metric, ...]] = ()
    policies: ClassVar[tuple[PolicySupport, ...]] = ()
    default_policy: ClassVar[str | None] = None
    # The metric the generic "stop when converged" rule watches unless a launch names another.
    convergence_metric: ClassVar[str | None] = None
    # A network simulation: its agents see their own last value and their neighbours' values
    # (Observation.previous, .streak, .neighbours) and need a population with a graph of edges.
    # Values travel between worker processes directly, once per round.
    network: ClassVar[bool] = False
    # A network simulation's LLM agents see this many neighbours' values in AgentView.neighbours
    # (the first in the graph's order): a prompt's length must not grow with a hub's degree.
    prompt_neighbours: ClassVar[int] = 10

    def pairs_agents(self, params: Params) -> bool:
        """A network simulation whose agents meet in pairs under these params: each round the
        runtime pairs them (a random matching along the graph's edges; random pairs of the whole
        population on a complete graph) and hands each cohort Observation.partners. Default:
        no pairing (it costs a little work and traffic each round)."""
        return False

    def plays_complete_graph(self, params: Params) -> bool:
        """Whether these params can play a population whose graph is complete (no edges are
        stored, so Observation.neighbours is None there: a policy reads Observation.partners
        instead). Default: no; a launch on a complete graph is then refused (409)."""
        return False

    def group_size(self, params: Params) -> int | None:
        """Agents per group when the simulation is played in groups (Resolution.groups), else
        None: group g is the agents numbered g * size ... (g + 1) * size - 1."""
        return None

    def action(self, params: Params) -> Action:
        """The type of an agent's action under these params."""
        raise NotImplementedError

    def check_population(self, params: Params, size: int) -> list[tuple[tuple, str, Any]]:
        """Why these params cannot play a population of `size` agents, as (loc within the
        params, message, value) triples (e.g. more first cases than agents): a launch is then
        a 422 naming the field, and nothing is stored. Default: nothing to check."""
        return []

    def resolve(self, params: Params, actions: RoundActions) -> Resolution:
        """The round's metrics from every agent's action. Pure: the same actions give the same
        resolution (a replayed or resumed round must come out the same)."""
        raise NotImplementedError

    def feedback(self, params: Params, metrics: Mapping[str, MetricValue]) -> dict | None:
        """What every agent hears before the next round, from this round's metrics alone (so a
        resumed run hears the same); None: nothing new, the last feedback stands."""
        return None

    def render(self, params: Params, view: AgentView) -> Prompt:
        """The prompt an LLM agent answers (a simulation listing llm_policy() writes it): the
        one renderer of its prompts, for rounds, transcripts and cost estimates alike. Pure,
        and bounded: a prompt over the runtime's limit fails the round."""
        raise NotImplementedError

    def stop(self, params: Params, history: Sequence[Mapping[str, MetricValue]]) -> str | None:
        """A reason to end the run after this round (history: every kept round's metrics,
        oldest first), or None to play on."""
        return None
