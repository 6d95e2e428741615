"""A mixed policy on the manager: the assignment sent to the workers, the run record's account of
it, and each round's breakdown by policy.

Who plays which part is decided by worker_server.rounds.assignment, the rule the workers apply
too: by share, from the run's seed and the agent's number alone; by attribute, from the agent's
category (read here once per run from the store, to break rounds down by policy).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from backend.populations.store import agent_attribute
from backend.simulations.config import MixedPolicyConfig, SimulationConfig
from populace.plugin import INVALID, LATE, LOST, VALID, agent_numbers, exact_sum
from worker_server.rounds.assignment import Assignment, AttributeAssignment, ShareAssignment


def assignment_of(config: SimulationConfig, seed: int, population_size: int) -> Assignment | None:
    """The run's assignment of agents to its mixed policy's parts (None: not mixed)."""
    policy = config.policy
    if not isinstance(policy, MixedPolicyConfig):
        return None
    parts = policy.parts
    if policy.attribute is None:
        return ShareAssignment.seeded(seed, [p.share for p in parts], population_size)
    by_category = {c: i for i, p in enumerate(parts) for c in p.categories}
    return AttributeAssignment(policy.attribute, by_category, len(parts) - 1)


def part_counts(
    config: SimulationConfig, assignment: Assignment | None, size: int, counts: dict
) -> list[int]:
    """Agents per part: exact by share; by attribute, from the population's category counts."""
    if assignment is None:
        return [size]
    if isinstance(assignment, ShareAssignment):
        return assignment.counts
    n_parts = len(config.policy_parts)
    return assignment.counts(counts.get(assignment.attribute, {}), size, n_parts)


def assignment_record(
    config: SimulationConfig, seed: int, size: int, counts: dict
) -> list[dict[str, Any]]:
    """The run record's `policies`: each part, its policy and its agent count."""
    assignment = assignment_of(config, seed, size)
    agents = part_counts(config, assignment, size, counts)
    out = []
    for part, n in zip(config.policy_parts, agents, strict=True):
        entry: dict[str, Any] = {
            "label": part.label,
            "kind": part.policy.kind,
            "policy": part.policy.model_dump(mode="json"),
            "agents": n,
        }
        if part.share is not None and isinstance(config.policy, MixedPolicyConfig):
            entry["share"] = part.share
        if isinstance(assignment, AttributeAssignment):
            entry["attribute"] = assignment.attribute
            entry["categories"] = list(part.categories)  # [] for the default part
        out.append(entry)
    return out


@dataclass(frozen=True)
class AgentParts:
    """Each agent's part, for breaking rounds down by policy."""

    labels: tuple[str, ...]
    assignment: Assignment
    # By attribute: the population's agent ids (sorted) and each one's part.
    ids: np.ndarray | None = None
    parts: np.ndarray | None = None

    def of(self, agent_ids: np.ndarray) -> np.ndarray:
        if isinstance(self.assignment, ShareAssignment):
            return self.assignment.parts(agent_numbers(agent_ids))
        assert self.ids is not None and self.parts is not None
        at = np.searchsorted(self.ids, agent_ids)
        found = at < len(self.ids)
        found[found] = self.ids[at[found]] == agent_ids[found]
        out = np.full(len(agent_ids), self.assignment.default, dtype=np.int64)
        out[found] = self.parts[at[found]]
        return out


async def agent_parts(
    session: AsyncSession, population_id: int, labels: tuple[str, ...], assignment: Assignment
) -> AgentParts:
    """The run's AgentParts; by attribute, the population's categories are read once."""
    if isinstance(assignment, ShareAssignment):
        return AgentParts(labels, assignment)
    numbers, categories = await agent_attribute(session, population_id, assignment.attribute)
    # One lookup per distinct category, then numpy: not a dict call per agent.
    names, codes = np.unique(categories, return_inverse=True)
    table = np.array([assignment.by_category.get(n, assignment.default) for n in names])
    ids = (np.int64(population_id) << 32) | numbers
    return AgentParts(labels, assignment, ids, table[codes].astype(np.int64))


def by_policy(
    parts: AgentParts, agent_ids: np.ndarray, values: np.ndarray, status: np.ndarray
) -> dict[str, dict[str, float | int | None]]:
    """A round broken down by policy: per part, its agents, status counts and mean action
    (an exact sum, so the same however the agents were spread over workers)."""
    part = parts.of(agent_ids)
    out = {}
    for i, label in enumerate(parts.labels):
        mine = part == i
        counts = np.bincount(status[mine], minlength=4)
        valid = values[mine & (status == VALID)]
        out[label] = {
            "agents": int(mine.sum()),
            "n_valid": int(counts[VALID]),
            "n_invalid": int(counts[INVALID]),
            "n_late": int(counts[LATE]),
            "n_lost": int(counts[LOST]),
            "mean": exact_sum(valid) / len(valid) if len(valid) else None,
        }
    return out


async def export_parts(session: AsyncSession, simulation, population) -> AgentParts | None:
    """Who played which part of a mixed run, for its exports' policy column (None: one policy,
    or a config or population this version cannot read back)."""
    if population is None:
        return None
    try:
        config = SimulationConfig.model_validate(simulation.config)
    except ValidationError:
        return None
    assignment = assignment_of(config, simulation.seed, population.size)
    if assignment is None:
        return None
    labels = tuple(part.label for part in config.policy_parts)
    return await agent_parts(session, simulation.population_id, labels, assignment)
