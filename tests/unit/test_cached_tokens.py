"""Prompt tokens the LLM servers took from their prefix cache: summed per part into a worker's
partial aggregate, carried over the wire, and summed over workers into the round's outcome."""

from __future__ import annotations

import numpy as np

from backend.rounds.fanout import RoundResult
from backend.rounds.merge import merge
from backend.simulations.outcome import RoundDecisions, outcome
from tests.support import guess_game
from tests.support_rounds import CLASSIC, collect, make_store
from worker_server.rounds import AgentSlots, CohortResult, Policy, RoundSpec, SubEnvironment
from worker_server.rounds.wire import aggregate_message
from worker_server.rpc import worker_pb2 as pb

RULE = pb.GameRule(ratio=2 / 3, offset=0, min=0, max=100)


class Caching(Policy):
    """Answers 10 in two parts per cohort: agents with an even id first, with 16 of their 20
    prompt tokens cached (as if their prompt shared a prefix already seen), then the others,
    with none cached."""

    kind = "caching"

    async def decide(self, cohort, context):
        raise AssertionError("decide_parts is used")

    async def decide_parts(self, cohort, context):
        even = cohort.ids % 2 == 0
        for positions, cached in ((np.flatnonzero(even), 16), (np.flatnonzero(~even), 0)):
            n = len(positions)
            yield CohortResult(
                values=np.full(n, 10.0),
                positions=positions,
                prompt_tokens=20 * n,
                cached_tokens=cached * n,
                completion_tokens=n,
            )


async def _partial(agents: range) -> pb.PartialAggregate:
    subenv = SubEnvironment(make_store(agents), AgentSlots(64))
    _, aggregate = await collect(subenv, RoundSpec("r", "p", 1, CLASSIC, Caching()))
    return aggregate_message(aggregate).aggregate


async def test_cached_tokens_are_summed_per_worker_and_over_workers():
    first = await _partial(range(0, 200))
    second = await _partial(range(200, 300))
    # Per worker: the sum of its parts, over all its cohorts.
    assert (first.prompt_tokens, first.cached_tokens) == (20 * 200, 16 * 100)
    assert (second.prompt_tokens, second.cached_tokens) == (20 * 100, 16 * 50)

    collected = RoundDecisions()
    collected("w", pb.DecisionBatch(agent_ids=list(range(300)), values=[10.0] * 300))
    collected.keep("w")
    partials = {"w1": first, "w2": second}
    result = RoundResult(merge(partials.values(), RULE, 101), partials, 300, 0.1)
    played = outcome(1, result, collected.table(), *guess_game(2 / 3, 0))
    assert played.prompt_tokens == 6000
    assert played.cached_prompt_tokens == 16 * 150
    assert played.stats()["cached_prompt_tokens"] == played.cached_prompt_tokens


def test_a_worker_that_reports_no_cached_tokens_counts_zero():
    """An older worker (no field 15) or a server that does not report its cache: 0, not an error."""
    old = pb.PartialAggregate(count=1, sum=5, sum_sq=25, min=5, max=5, prompt_tokens=9)
    old.histogram.extend(np.histogram([5.0], 101, range=(0, 100))[0].tolist())
    old = pb.PartialAggregate.FromString(old.SerializeToString())
    collected = RoundDecisions()
    collected("w", pb.DecisionBatch(agent_ids=[1], values=[5.0]))
    collected.keep("w")
    result = RoundResult(merge([old], RULE, 101), {"w": old}, 1, 0.1)
    played = outcome(1, result, collected.table(), *guess_game(2 / 3, 0))
    assert (played.prompt_tokens, played.cached_prompt_tokens) == (9, 0)
