"""How agents decide: one interface, vectorised over a cohort of agents.

The sub-environment hands a policy cohorts of at most `max_concurrency` agents (the per-process
concurrency cap, shared by all rounds); `decide` returns one value per agent (NaN = no valid
answer). A policy without per-agent I/O works on the whole cohort with numpy and awaits at most
once per cohort: never one coroutine per agent.

A policy may report more than values by returning a `CohortResult` (agents the per-agent
deadline cut, raw answers, LLM usage), and may report a cohort in parts as its agents finish by
overriding `decide_parts` (the LLM policy does: one cohort can be the whole population, and its
decisions should stream while it runs). The LLM policy (worker_server.rounds.llm) is the one
place with per-agent coroutines, bounded by its endpoints' caps.
"""

from __future__ import annotations

import abc
import asyncio
import math
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

import worker_server.rounds.randomness as randomness
from worker_server.agents import Agent, Population
from worker_server.llm.shared_reads import RoundReads
from worker_server.llm.templates import Feedback
from worker_server.llm.usage import EndpointUsage
from worker_server.rounds.errors import InvalidRound

MAX_LATENCY_S = 3600.0
MAX_DEPTH = 100


@dataclass(frozen=True)
class GameRule:
    """target = ratio * mean + offset; decisions must lie in [min, max]."""

    ratio: float
    offset: float
    min: float
    max: float

    def __post_init__(self) -> None:
        for name in ("ratio", "offset", "min", "max"):
            if not math.isfinite(getattr(self, name)):
                raise InvalidRound(f"rule.{name} must be finite")
        if not self.min < self.max:
            raise InvalidRound(f"rule.min ({self.min}) must be less than rule.max ({self.max})")


@dataclass(frozen=True)
class RoundContext:
    """What every agent is told about the round."""

    round: int
    seed: int
    rule: GameRule
    feedback: float | None  # last round's winning number, if any
    simulation_id: str = ""
    # Every earlier round's outcome in this simulation, oldest first.
    history: tuple[Feedback, ...] = ()
    # The rounds of the entries the cohort's agents remember (Population.recent_memory), oldest
    # first: the last column is from memory_rounds[-1], the one before from [-2], ... (in a
    # replay, only rounds before this one: the replayed entries are hidden).
    memory_rounds: tuple[int, ...] = ()
    # Keep each agent's raw answer (CohortResult.responses).
    store_responses: bool = False
    # Where exchangeable LLM agents' answer distributions are read (None: by each cohort).
    reads: RoundReads | None = None


@dataclass
class CohortResult:
    """What a policy reports for a cohort, or for a part of it."""

    values: np.ndarray  # float64; NaN = no valid answer
    # Which agents of the cohort these are (indices into its rows); None: all, in order.
    positions: np.ndarray | None = None
    # Agents the per-agent deadline cut: late, not invalid (their value is ignored).
    late: np.ndarray | None = None
    # Raw answers, one per value (only with store_responses).
    responses: Sequence[str] | None = None
    prompt_tokens: int = 0
    # Of prompt_tokens, those the LLM servers said they took from their prefix cache.
    cached_tokens: int = 0
    completion_tokens: int = 0
    llm_errors: int = 0
    # What the cohort (or part) asked of each LLM endpoint: counters, not per-agent records.
    endpoints: Sequence[EndpointUsage] = ()


@dataclass(frozen=True)
class Cohort:
    """Agents deciding together: rows of a population snapshot."""

    population: Population
    rows: np.ndarray  # int64, ascending

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def ids(self) -> np.ndarray:
        return self.population.ids[self.rows]

    def agents(self) -> list[Agent]:
        """Materialised views, for policies that need each agent's persona and memory."""
        return self.population.agents(self.rows)


class Policy(abc.ABC):
    kind: str

    def check(self, population: Population) -> None:  # noqa: B027 - optional hook
        """Reject (InvalidRound) a policy that cannot run on this population, before anything runs."""

    @abc.abstractmethod
    async def decide(self, cohort: Cohort, context: RoundContext) -> np.ndarray | CohortResult:
        """One float64 per agent of the cohort, in cohort order; NaN marks an invalid answer."""

    async def decide_parts(
        self, cohort: Cohort, context: RoundContext
    ) -> AsyncIterator[CohortResult]:
        """The cohort's results in parts that together cover every agent once (default: one)."""
        result = await self.decide(cohort, context)
        yield result if isinstance(result, CohortResult) else CohortResult(values=result)


@dataclass(frozen=True)
class SyntheticPolicy(Policy):
    """The paper's benchmark: wait `latency_s` (standing in for an LLM call), then answer
    uniformly in [min, max] from the agent's own placement-independent random stream."""

    latency_s: float
    kind: str = field(default="synthetic", init=False)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.latency_s) and 0 <= self.latency_s <= MAX_LATENCY_S):
            raise InvalidRound(f"synthetic.latency_s must be in [0, {MAX_LATENCY_S:g}]")

    async def decide(self, cohort: Cohort, context: RoundContext) -> np.ndarray:
        # One timer for the whole cohort: its agents all wait the same latency, concurrently.
        await asyncio.sleep(self.latency_s)
        rule = context.rule
        u = randomness.uniforms(
            context.seed, context.round, randomness.SYNTHETIC_UNIFORM, cohort.ids
        )
        return rule.min + u * (rule.max - rule.min)


@dataclass(frozen=True)
class LevelKPolicy(Policy):
    """Bounded rationality. Level 0 anchors on the feedback (else the middle of the range);
    level k best-responds to level k-1: x_k = ratio * x_{k-1} + offset. Then gaussian noise
    (noise_std, per agent and round), clipped to [min, max]. Depth comes from the agent's
    category of `depth_attribute` through `depth_by_category`, else `default_depth`."""

    depth_attribute: str
    depth_by_category: Mapping[str, int]
    default_depth: int
    noise_std: float
    kind: str = field(default="level_k", init=False)

    def __post_init__(self) -> None:
        depths = {"level_k.default_depth": self.default_depth}
        depths |= {
            f"level_k.depth_by_category[{c!r}]": d for c, d in self.depth_by_category.items()
        }
        for name, depth in depths.items():
            if not 0 <= depth <= MAX_DEPTH:
                raise InvalidRound(f"{name} must be in 0..{MAX_DEPTH}, got {depth}")
        if not (math.isfinite(self.noise_std) and self.noise_std >= 0):
            raise InvalidRound("level_k.noise_std must be finite and >= 0")

    def check(self, population: Population) -> None:
        if self.depth_attribute and self.depth_attribute not in population.attributes:
            known = ", ".join(sorted(population.attributes)) or "none"
            raise InvalidRound(
                f"level_k.depth_attribute {self.depth_attribute!r} is not an attribute of "
                f"population {population.population_id!r} (it has: {known})"
            )

    def depths(self, cohort: Cohort) -> np.ndarray:
        if not self.depth_attribute:
            return np.full(len(cohort), self.default_depth, dtype=np.int64)
        attribute = cohort.population.attributes[self.depth_attribute]
        table = np.array(
            [self.depth_by_category.get(c, self.default_depth) for c in attribute.categories]
            + [self.default_depth],  # the MISSING code lands on the extra entry
            dtype=np.int64,
        )
        codes = attribute.codes[cohort.rows].astype(np.int64)
        return table[np.minimum(codes, len(table) - 1)]

    async def decide(self, cohort: Cohort, context: RoundContext) -> np.ndarray:
        rule = context.rule
        depth = self.depths(cohort)
        anchor = context.feedback if context.feedback is not None else (rule.min + rule.max) / 2
        values = np.full(len(cohort), anchor, dtype=np.float64)
        for level in range(1, int(depth.max(initial=0)) + 1):
            deeper = depth >= level
            values[deeper] = rule.ratio * values[deeper] + rule.offset
        if self.noise_std > 0:
            values += self.noise_std * randomness.normals(context.seed, context.round, cohort.ids)
        return np.clip(values, rule.min, rule.max)
