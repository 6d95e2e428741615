"""A mixed policy: different policies for different agents of one run.

Each cohort the sub-environment hands over is split into one sub-cohort per part (by the shared
rule of worker_server.rounds.assignment, vectorised), and each sub-cohort is played by its part's
policy. The parts run side by side (an LLM part must not hold up a rule-based one) and their
results stream back as they come, their positions mapped back into the cohort, so the
sub-environment settles them exactly as it settles any policy's parts.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from populace.plugin import agent_numbers
from worker_server.agents import Population
from worker_server.rounds.assignment import Assignment, AttributeAssignment
from worker_server.rounds.errors import InvalidRound
from worker_server.rounds.policies import Cohort, CohortResult, Policy, RoundContext

_DONE = object()


@dataclass(frozen=True)
class MixedPolicy(Policy):
    """parts[i] plays the agents the assignment gives part i."""

    parts: Sequence[Policy]
    labels: Sequence[str]
    assignment: Assignment
    kind: str = field(default="mixed", init=False)

    def check(self, population: Population) -> None:
        rule = self.assignment
        if isinstance(rule, AttributeAssignment) and rule.attribute not in population.attributes:
            known = ", ".join(sorted(population.attributes)) or "none"
            raise InvalidRound(
                f"policy.mixed.attribute: {rule.attribute!r} is not an attribute of population "
                f"{population.population_id!r} (it has: {known})"
            )
        for policy in self.parts:
            policy.check(population)

    def part_of(self, cohort: Cohort) -> np.ndarray:
        """Each agent's part, in cohort order."""
        rule = self.assignment
        if isinstance(rule, AttributeAssignment):
            column = cohort.population.attributes[rule.attribute]
            return rule.parts(column.codes[cohort.rows], column.categories)
        return rule.parts(agent_numbers(cohort.ids))

    def split(self, cohort: Cohort) -> list[tuple[int, np.ndarray]]:
        """(part, positions in the cohort) of every part with agents here."""
        parts = self.part_of(cohort)
        order = np.argsort(parts, kind="stable")  # positions stay ascending within a part
        starts = np.searchsorted(parts[order], np.arange(len(self.parts) + 1))
        return [
            (i, order[starts[i] : starts[i + 1]])
            for i in range(len(self.parts))
            if starts[i + 1] > starts[i]
        ]

    async def decide(self, cohort: Cohort, context: RoundContext) -> CohortResult:
        """The whole cohort's values and late marks at once (the sub-environment uses
        decide_parts, which also carries the LLM part's usage)."""
        values = np.full(len(cohort), np.nan)
        late = np.zeros(len(cohort), dtype=bool)
        async for part in self.decide_parts(cohort, context):
            values[part.positions] = part.values
            if part.late is not None:
                late[part.positions] = part.late
        return CohortResult(values=values, late=late)

    async def decide_parts(
        self, cohort: Cohort, context: RoundContext
    ) -> AsyncIterator[CohortResult]:
        queue: asyncio.Queue = asyncio.Queue()

        async def play(part: int, positions: np.ndarray) -> None:
            sub = Cohort(cohort.population, cohort.rows[positions])
            try:
                results = self.parts[part].decide_parts(sub, context)
                async with contextlib.aclosing(results):
                    async for result in results:
                        queue.put_nowait(_in_cohort(result, positions))
            except Exception as exc:  # told to the round, which fails with it
                queue.put_nowait(exc)
            finally:
                queue.put_nowait(_DONE)

        tasks = [asyncio.create_task(play(i, at)) for i, at in self.split(cohort)]
        try:
            running = len(tasks)
            while running:
                item = await queue.get()
                if item is _DONE:
                    running -= 1
                elif isinstance(item, Exception):
                    raise item
                else:
                    yield item
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


def _in_cohort(result: CohortResult | np.ndarray, positions: np.ndarray) -> CohortResult:
    """A sub-cohort's result with its positions mapped back into the whole cohort."""
    if not isinstance(result, CohortResult):
        result = CohortResult(values=result)
    at = positions if result.positions is None else positions[np.asarray(result.positions)]
    return dataclasses.replace(result, positions=at)
