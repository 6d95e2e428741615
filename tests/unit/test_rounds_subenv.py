"""The sub-environment: batching, invalid and late agents, cancel, the shared concurrency cap."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from tests.unit.test_rounds_policies import CLASSIC, make_store
from worker_server.rounds import (
    AgentSlots,
    DecisionChunk,
    GameRule,
    InvalidRound,
    PartialAggregate,
    Policy,
    RoundAlreadyRunning,
    RoundCancelled,
    RoundFailed,
    RoundSpec,
    SubEnvironment,
    SyntheticPolicy,
)
from worker_server.rounds.wire import round_spec
from worker_server.rpc import worker_pb2 as pb


class ScriptedPolicy(Policy):
    """Answers agent id % 200 - 50: NaN for id % 7 == 0, so some are invalid."""

    kind = "scripted"

    async def decide(self, cohort, context):
        values = (cohort.ids % 200 - 50).astype(np.float64)
        values[cohort.ids % 7 == 0] = np.nan
        return values


class Exploding(Policy):
    kind = "exploding"

    async def decide(self, cohort, context):
        raise ZeroDivisionError("boom")


async def collect(subenv, spec):
    chunks, aggregate = [], None
    async for out in subenv.run(spec):
        assert aggregate is None, "the aggregate comes last"
        if isinstance(out, PartialAggregate):
            aggregate = out
        else:
            chunks.append(out)
    return chunks, aggregate


async def test_decisions_stream_in_full_batches_then_one_aggregate():
    store = make_store(range(25_000))
    subenv = SubEnvironment(store, AgentSlots(3000))
    spec = RoundSpec("r", "p", 1, CLASSIC, SyntheticPolicy(0.0), segment_by=("education",))
    chunks, aggregate = await collect(subenv, spec)
    assert [len(c.ids) for c in chunks] == [10_000, 10_000, 5000]
    ids = np.concatenate([c.ids for c in chunks])
    values = np.concatenate([c.values for c in chunks])
    assert sorted(ids.tolist()) == list(range(25_000))
    assert aggregate.count == 25_000 and (aggregate.n_invalid, aggregate.n_late) == (0, 0)
    assert np.isclose(aggregate.sum, values.sum())
    assert aggregate.histogram.tolist() == np.histogram(values, 101, range=(0, 100))[0].tolist()
    by_category = {s.category: s.count for s in aggregate.segments}
    assert by_category == {
        c: (ids % 4 == k).sum()
        for k, c in enumerate(["primary school", "bachelor", "master", "doctorate"])
    }
    assert subenv.rounds_running == 0


async def test_invalid_answers_are_counted_streamed_and_not_remembered():
    store = make_store(range(1000))
    chunks, aggregate = await collect(
        SubEnvironment(store, AgentSlots(300)), RoundSpec("r", "p", 1, CLASSIC, ScriptedPolicy())
    )
    ids = np.arange(1000)
    raw = (ids % 200 - 50).astype(float)
    invalid = (ids % 7 == 0) | (raw < 0) | (raw > 100)
    streamed_invalid = np.concatenate([c.invalid_ids for c in chunks])
    assert sorted(streamed_invalid.tolist()) == ids[invalid].tolist()
    assert aggregate.n_invalid == invalid.sum() and aggregate.count == (~invalid).sum()
    assert aggregate.sum == raw[~invalid].sum()
    memory = {a.id: a.memory for a in store.list_agents("p", None, 1000)[0]}
    assert memory[0] == [] and memory[1] == [] and memory[8] == [], "invalid answers"
    assert memory[51] == [1.0]


async def test_agents_not_done_by_the_deadline_are_late():
    store = make_store(range(3000))
    # A cap of 1000 agents: cohorts take 0.3 s each, one after another.
    subenv = SubEnvironment(store, AgentSlots(1000))
    spec = RoundSpec("r", "p", 1, CLASSIC, SyntheticPolicy(0.3), deadline_s=0.45)
    started = time.perf_counter()
    chunks, aggregate = await collect(subenv, spec)
    assert time.perf_counter() - started < 0.7
    assert aggregate.count == 1000 and aggregate.n_late == 2000
    late = np.concatenate([c.late_ids for c in chunks])
    assert sorted(late.tolist()) == list(range(1000, 3000))
    assert sorted(np.concatenate([c.ids for c in chunks]).tolist()) == list(range(1000))


async def test_cancel_stops_the_round_without_an_aggregate_and_frees_the_cap():
    store = make_store(range(5000))
    slots = AgentSlots(2000)
    subenv = SubEnvironment(store, slots)
    spec = RoundSpec("r-cancel", "p", 1, CLASSIC, SyntheticPolicy(5.0))
    outputs = []

    async def consume():
        async for out in subenv.run(spec):
            outputs.append(out)

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.2)
    assert subenv.rounds_running == 1 and slots.in_flight == 2000
    started = time.perf_counter()
    assert subenv.cancel("r-cancel") is True
    with pytest.raises(RoundCancelled):
        await task
    assert time.perf_counter() - started < 0.5
    assert outputs == []
    assert subenv.rounds_running == 0 and slots.in_flight == 0
    assert subenv.cancel("r-cancel") is False, "unknown once it is over"
    assert subenv.cancel("never-ran") is False


async def test_a_consumer_that_goes_away_cancels_the_round():
    store = make_store(range(20_000))
    slots = AgentSlots(10_000)
    subenv = SubEnvironment(store, slots)
    outputs = subenv.run(RoundSpec("r", "p", 1, CLASSIC, SyntheticPolicy(0.2)))
    first = await outputs.__anext__()
    assert isinstance(first, DecisionChunk)
    await outputs.aclose()
    assert subenv.rounds_running == 0 and slots.in_flight == 0


async def test_rounds_share_the_concurrency_cap():
    store = make_store(range(2000))
    slots = AgentSlots(1000)
    subenv = SubEnvironment(store, slots)
    peak = 0

    async def watch():
        nonlocal peak
        while True:
            peak = max(peak, slots.in_flight)
            await asyncio.sleep(0.01)

    watcher = asyncio.create_task(watch())
    started = time.perf_counter()
    await asyncio.gather(
        *(
            collect(subenv, RoundSpec(f"r{i}", "p", 1, CLASSIC, SyntheticPolicy(0.2)))
            for i in (1, 2)
        )
    )
    watcher.cancel()
    # 4 cohorts of 1000 agents, one at a time.
    assert time.perf_counter() - started >= 0.8
    assert peak == 1000


async def test_requests_that_cannot_run_fail_before_any_agent_acts():
    store = make_store(range(100))
    subenv = SubEnvironment(store, AgentSlots(1000))
    with pytest.raises(InvalidRound, match="segment_by: 'income' is not an attribute"):
        subenv.run(RoundSpec("r", "p", 1, CLASSIC, SyntheticPolicy(0), segment_by=("income",)))
    assert all(a.memory == [] for a in store.list_agents("p", None, 100)[0])
    running = subenv.run(RoundSpec("dup", "p", 1, CLASSIC, SyntheticPolicy(1.0)))
    first = asyncio.create_task(running.__anext__())
    await asyncio.sleep(0.05)
    with pytest.raises(RoundAlreadyRunning):
        await subenv.run(RoundSpec("dup", "p", 1, CLASSIC, SyntheticPolicy(0))).__anext__()
    first.cancel()
    await asyncio.gather(first, return_exceptions=True)
    await running.aclose()
    assert subenv.rounds_running == 0


async def test_a_failing_policy_fails_the_round():
    subenv = SubEnvironment(make_store(range(10)), AgentSlots(1000))
    with pytest.raises(RoundFailed, match="ZeroDivisionError: boom"):
        await collect(subenv, RoundSpec("r", "p", 1, CLASSIC, Exploding()))
    assert subenv.rounds_running == 0


async def test_a_population_not_hosted_here_gives_an_empty_aggregate():
    subenv = SubEnvironment(make_store(range(10)), AgentSlots(1000))
    chunks, aggregate = await collect(
        subenv,
        RoundSpec("r", "elsewhere", 1, GameRule(1, 0, 0, 10), SyntheticPolicy(0), bins=5),
    )
    assert chunks == []
    assert aggregate.count == 0 and aggregate.histogram.tolist() == [0] * 5


def request(**overrides):
    fields = {
        "round_id": "r",
        "population_id": "p",
        "round": 1,
        "rule": pb.GameRule(ratio=2 / 3, offset=0, min=0, max=100),
        "policy": pb.Policy(synthetic=pb.SyntheticPolicy(latency_s=1)),
    }
    fields.update(overrides)
    return pb.RunRoundRequest(**fields)


def test_request_defaults():
    spec = round_spec(request())
    assert (spec.bins, spec.batch_size, spec.deadline_s, spec.feedback) == (101, 10_000, 0.0, None)
    assert round_spec(request(batch_size=50, feedback=0.0)).batch_size == 10_000
    assert round_spec(request(feedback=0.0)).feedback == 0.0
    assert round_spec(request(batch_size=20_000)).batch_size == 20_000


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"rule": pb.GameRule(ratio=1, min=5, max=5)}, "rule.min (5.0) must be less than rule.max"),
        ({"rule": pb.GameRule(ratio=float("inf"), max=1)}, "rule.ratio must be finite"),
        ({"rule": pb.GameRule(offset=float("nan"), max=1)}, "rule.offset must be finite"),
        ({"policy": pb.Policy()}, "policy: not set"),
        ({"round_id": ""}, "round_id must not be empty"),
        ({"round": 0}, "round is 1-based"),
        ({"histogram_bins": -1}, "histogram_bins"),
        ({"batch_size": -1}, "batch_size"),
        ({"deadline_s": -1}, "deadline_s"),
        ({"segment_by": ["a", "a"]}, "segment_by names an attribute twice"),
        ({"feedback": float("nan")}, "feedback must be finite"),
    ],
)
def test_bad_requests_are_rejected(overrides, message):
    with pytest.raises(InvalidRound, match=message.replace("(", r"\(").replace(")", r"\)")):
        round_spec(request(**overrides))


async def test_a_cap_of_one_runs_agents_one_at_a_time():
    store = make_store(range(300))
    slots = AgentSlots(1)
    chunks, aggregate = await collect(
        SubEnvironment(store, slots), RoundSpec("r", "p", 1, CLASSIC, SyntheticPolicy(0.0))
    )
    assert aggregate.count == 300 and sorted(chunks[0].ids.tolist()) == list(range(300))
    assert slots.in_flight == 0
