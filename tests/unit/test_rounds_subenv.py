"""The sub-environment: batching, invalid and late agents, cancel, the shared concurrency cap."""

from __future__ import annotations

import asyncio
import math
import time

import numpy as np
import pytest

from bench.openai_server import OpenAIServer, default_answer, stable_fraction
from tests.support_rounds import CLASSIC, collect, make_store
from tests.support_rounds_llm import AGENT, MODEL, llm_message
from worker_server.agents import AgentStore, decode_batch
from worker_server.llm import LlmClient
from worker_server.rounds import (
    AgentSlots,
    CohortResult,
    DecisionChunk,
    GameRule,
    InvalidRound,
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


async def test_decisions_stream_in_full_batches_then_one_aggregate():
    store = make_store(range(25_000))
    # No early flush however slow the machine: the chunk sizes are the point here.
    subenv = SubEnvironment(store, AgentSlots(3000), progress_flush_s=math.inf)
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


async def test_a_slow_round_sends_what_it_has_without_waiting_for_a_full_batch():
    store = make_store(range(25_000))
    # Flushing at every part stands in for parts that come further apart than the interval.
    subenv = SubEnvironment(store, AgentSlots(3000), progress_flush_s=0.0)
    spec = RoundSpec("r", "p", 1, CLASSIC, SyntheticPolicy(0.0))
    chunks, aggregate = await collect(subenv, spec)
    sizes = [len(c.ids) for c in chunks]
    assert len(sizes) > 3 and max(sizes) <= 3000, sizes
    assert sorted(np.concatenate([c.ids for c in chunks]).tolist()) == list(range(25_000))
    assert aggregate.count == 25_000


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


class Gated(Policy):
    """Cohorts starting at an id in `answering` answer 1 at once; the others wait until they
    are cancelled. It records what it saw, and signals each cohort's start."""

    kind = "gated"

    def __init__(self, slots: AgentSlots | None = None, answering=(), rounds: int = 4) -> None:
        self.slots = slots
        self.answering = set(answering)
        self.started: list[int] = []  # first id of each cohort, as it starts
        self.cancelled: list[int] = []
        self.in_flight: list[int] = []  # slots.in_flight as each cohort starts
        self.running = self.peak = 0
        self.some_started = asyncio.Event()
        self.rounds = rounds  # loop turns an answering cohort stays in decide

    async def decide(self, cohort, context):
        first = int(cohort.ids[0])
        self.started.append(first)
        if self.slots is not None:
            self.in_flight.append(self.slots.in_flight)
        self.running += 1
        self.peak = max(self.peak, self.running)
        self.some_started.set()
        try:
            if first in self.answering:
                # Turns of the loop, not time: anything else that could run meanwhile does.
                for _ in range(self.rounds):
                    await asyncio.sleep(0)
                return np.ones(len(cohort))
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.append(first)
            raise
        finally:
            self.running -= 1


async def test_agents_not_done_by_the_deadline_are_late():
    store = make_store(range(3000))
    # A cap of 1000 agents: cohorts run one after another. The first answers at once, the
    # second never does, so the deadline (not its answer) ends the round.
    subenv = SubEnvironment(store, AgentSlots(1000))
    policy = Gated(answering={0})
    spec = RoundSpec("r", "p", 1, CLASSIC, policy, deadline_s=0.5)
    # A round that waited for its cohorts instead of the deadline would never end.
    async with asyncio.timeout(30):
        chunks, aggregate = await collect(subenv, spec)
    assert policy.started == [0, 1000], "the third cohort never got the cap"
    assert policy.cancelled == [1000], "the cohort the deadline cut was cancelled"
    assert aggregate.count == 1000 and aggregate.n_late == 2000
    late = np.concatenate([c.late_ids for c in chunks])
    assert sorted(late.tolist()) == list(range(1000, 3000))
    assert sorted(np.concatenate([c.ids for c in chunks]).tolist()) == list(range(1000))
    assert subenv.rounds_running == 0


async def test_cancel_stops_the_round_without_an_aggregate_and_frees_the_cap():
    store = make_store(range(5000))
    slots = AgentSlots(2000)
    subenv = SubEnvironment(store, slots)
    # Cohorts that never answer: only the cancel can end this round.
    policy = Gated(slots)
    spec = RoundSpec("r-cancel", "p", 1, CLASSIC, policy)
    outputs = []

    async def consume():
        async for out in subenv.run(spec):
            outputs.append(out)

    task = asyncio.create_task(consume())
    await policy.some_started.wait()
    assert subenv.rounds_running == 1 and slots.in_flight == 2000
    assert subenv.cancel("r-cancel") is True
    with pytest.raises(RoundCancelled):
        async with asyncio.timeout(30):  # a hang guard: the cohort itself never ends
            await task
    assert policy.started == [0] and policy.cancelled == [0], "the cohort in flight cancelled"
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
    # Each cohort stays in decide for some turns of the loop: were the cap not shared, the
    # other round's cohort would start meanwhile.
    policy = Gated(slots, answering={0, 1000}, rounds=20)
    await asyncio.gather(
        *(collect(subenv, RoundSpec(f"r{i}", "p", 1, CLASSIC, policy)) for i in (1, 2))
    )
    # 4 cohorts of 1000 agents (2 per round), one at a time.
    assert sorted(policy.started) == [0, 0, 1000, 1000]
    assert policy.peak == 1, "never two cohorts deciding at once"
    assert policy.in_flight == [1000] * 4
    assert slots.in_flight == 0


async def test_requests_that_cannot_run_fail_before_any_agent_acts():
    store = make_store(range(100))
    subenv = SubEnvironment(store, AgentSlots(1000))
    with pytest.raises(InvalidRound, match="segment_by: 'income' is not an attribute"):
        subenv.run(RoundSpec("r", "p", 1, CLASSIC, SyntheticPolicy(0), segment_by=("income",)))
    assert all(a.memory == [] for a in store.list_agents("p", None, 100)[0])
    policy = Gated()
    running = subenv.run(RoundSpec("dup", "p", 1, CLASSIC, policy))
    first = asyncio.create_task(running.__anext__())
    await policy.some_started.wait()  # its agents are acting: the round is running
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


# -- subset rounds (RunRoundRequest.only) ----------------------------------------------------


def test_only_is_parsed_sorted_and_unique_and_unset_means_everyone():
    assert round_spec(request()).only is None
    spec = round_spec(request(only=pb.AgentIds(ids=[9, 3, 9, -1])))
    assert spec.only.dtype == np.int64 and spec.only.tolist() == [-1, 3, 9]
    assert round_spec(request(only=pb.AgentIds())).only.tolist() == [], "set but empty: nobody"


async def test_a_subset_round_runs_only_the_listed_hosted_agents():
    store = make_store(range(0, 3000, 3))  # ids 0, 3, ..., 2997
    # A cap of 64: the 400 listed hosted agents run in several cohorts.
    subenv = SubEnvironment(store, AgentSlots(64))
    full, _ = await collect(
        subenv, RoundSpec("full", "p", 1, CLASSIC, SyntheticPolicy(0.0), seed=5)
    )
    full_values = dict(
        zip(
            np.concatenate([c.ids for c in full]).tolist(),
            np.concatenate([c.values for c in full]).tolist(),
            strict=True,
        )
    )
    hosted = np.arange(0, 3000, 3)
    listed = np.random.default_rng(1).permutation(np.concatenate([hosted[::2][:400], [1, 2, 5]]))
    spec = round_spec(
        request(
            round_id="subset",
            seed=5,
            policy=pb.Policy(synthetic=pb.SyntheticPolicy(latency_s=0)),
            segment_by=["education"],
            only=pb.AgentIds(ids=[*listed.tolist(), int(listed[0])]),  # a repeat, too
        )
    )
    chunks, aggregate = await collect(subenv, spec)
    ids = np.concatenate([c.ids for c in chunks])
    values = np.concatenate([c.values for c in chunks])
    assert sorted(ids.tolist()) == sorted(hosted[::2][:400].tolist()), "not 1, 2, 5: not here"
    assert values.tolist() == [full_values[i] for i in ids.tolist()], "the same as in a full round"
    assert (aggregate.count, aggregate.n_invalid, aggregate.n_late) == (400, 0, 0)
    assert np.isclose(aggregate.sum, values.sum())
    assert sum(s.count for s in aggregate.segments) == 400
    assert all(len(c.late_ids) == len(c.invalid_ids) == 0 for c in chunks)


class Stalling(Policy):
    """Every agent but 0 answers 1 at once; agent 0 never does."""

    kind = "stalling"

    async def decide(self, cohort, context):
        raise AssertionError("decide_parts is used")

    def __init__(self) -> None:
        self.stalled = asyncio.Event()  # set once the others answered and agent 0 stalls

    async def decide_parts(self, cohort, context):
        answering = np.flatnonzero(cohort.ids != 0)
        yield CohortResult(values=np.ones(len(answering)), positions=answering)
        if len(answering) < len(cohort):
            self.stalled.set()
            await asyncio.Event().wait()


async def test_only_listed_agents_can_be_late_and_nobody_listed_is_an_empty_round():
    store = make_store(range(100))
    subenv = SubEnvironment(store, AgentSlots(20))
    listed = list(range(0, 100, 5))  # 20 agents, one cohort; agent 0 never answers
    spec = RoundSpec(
        "r", "p", 1, CLASSIC, Stalling(), deadline_s=0.3, only=np.asarray(listed, dtype=np.int64)
    )
    chunks, aggregate = await collect(subenv, spec)
    late = np.concatenate([c.late_ids for c in chunks]).tolist()
    assert late == [0] and aggregate.n_late == 1, "agents sitting the round out are not late"
    assert sorted(np.concatenate([c.ids for c in chunks]).tolist()) == listed[1:]
    assert aggregate.count == 19

    nobody = RoundSpec("n", "p", 2, CLASSIC, Stalling(), only=np.empty(0, dtype=np.int64))
    chunks, aggregate = await collect(subenv, nobody)
    assert chunks == [] and (aggregate.count, aggregate.n_late, aggregate.n_invalid) == (0, 0, 0)


# -- memory across subsets, replays and roll-backs -------------------------------------------


class Remembering(Policy):
    """Answers id % 50 + round (NaN for the ids in `invalid`), and notes what each agent saw:
    the rounds its memory holds and its memory (recent_memory, as the LLM policy reads it)."""

    kind = "remembering"

    def __init__(self, invalid=()):
        self.invalid = set(invalid)
        self.seen: dict[int, tuple[tuple[int, ...], list[float]]] = {}

    async def decide(self, cohort, context):
        memory = cohort.population.recent_memory(cohort.rows)
        for i, agent in enumerate(cohort.ids.tolist()):
            self.seen[agent] = (context.memory_rounds, memory[i].tolist())
        values = (cohort.ids % 50 + context.round).astype(np.float64)
        values[np.isin(cohort.ids, list(self.invalid))] = np.nan
        return values


def memory_size_store(ids, memory_size):
    store = AgentStore(10_000, memory_size=memory_size)
    with store.upload() as up:
        up.add(decode_batch(pb.AgentBatch(population_id="p", agent_ids=list(ids)), 0))
        up.commit()
    return store


async def play_round(subenv, number, *, only=None, simulation="s", policy=None):
    policy = policy or Remembering()
    spec = RoundSpec(
        f"{simulation}-{number}-{time.monotonic_ns()}",
        "p",
        number,
        CLASSIC,
        policy,
        simulation_id=simulation,
        only=None if only is None else np.asarray(only, dtype=np.int64),
    )
    await collect(subenv, spec)
    return policy.seen


def rings(store):
    population = store.population("p")
    recent = population.recent_memory(np.arange(len(population)))
    return {int(i): row.tolist() for i, row in zip(population.ids, recent, strict=True)}


NAN = float("nan")
INF = float("inf")


def same(a, b):
    return np.array_equal(np.asarray(a, dtype=float), np.asarray(b, dtype=float), equal_nan=True)


async def test_a_new_round_played_by_a_subset_appends_for_everyone():
    store = memory_size_store([1, 2, 3], memory_size=3)
    subenv = SubEnvironment(store, AgentSlots(100))
    await play_round(subenv, 1)
    await play_round(subenv, 2, only=[2])
    assert store.memory_log("p").rounds == [1, 2]
    got = rings(store)
    assert same(got[1], [NAN, 2, -INF]) and same(got[2], [NAN, 3, 4]), "1 sat round 2 out"


async def test_a_replayed_round_overwrites_the_players_latest_entries_and_sees_memory_before_it():
    store = memory_size_store([1, 2, 3], memory_size=2)
    subenv = SubEnvironment(store, AgentSlots(100))
    for number in (1, 2):
        await play_round(subenv, number)
    await play_round(subenv, 3, policy=Remembering(invalid={1, 2}))
    assert store.memory_log("p").rounds == [1, 2, 3]
    # Round 3 again for agents 1 and 2 (they answered nothing valid the first time): they see
    # rounds 1 and 2, as in the first play (the ring keeps one entry more than remembered).
    seen = await play_round(subenv, 3, only=[1, 2])
    assert set(seen) == {1, 2}
    assert seen[1] == ((1, 2), [2.0, 3.0]) and seen[2] == ((1, 2), [3.0, 4.0])
    assert store.memory_log("p").rounds == [1, 2, 3], "nothing appended"
    got = rings(store)
    assert got == {1: [3.0, 4.0], 2: [4.0, 5.0], 3: [5.0, 6.0]}
    # The next round sees the replayed decisions.
    seen = await play_round(subenv, 4)
    assert seen[1] == ((2, 3), [3.0, 4.0])


async def test_a_full_replay_of_the_latest_round_is_what_its_first_play_was():
    store = memory_size_store(range(6), memory_size=2)
    subenv = SubEnvironment(store, AgentSlots(4))
    for number in (1, 2, 3):
        first = await play_round(subenv, number)
    before = rings(store)
    again = await play_round(subenv, 3)
    assert again == first
    assert rings(store) == before and store.memory_log("p").rounds == [1, 2, 3]


async def test_an_earlier_round_rolls_back_the_later_ones_for_every_agent():
    store = memory_size_store([1, 2, 3], memory_size=3)
    subenv = SubEnvironment(store, AgentSlots(100))
    for number in (1, 2, 3, 4):
        await play_round(subenv, number)
    # Round 3 again, for agent 3 only: rounds 3 and 4 are forgotten for all, then round 3 is new.
    seen = await play_round(subenv, 3, only=[3])
    assert seen[3][0] == (1, 2) and same(seen[3][1], [NAN, 4, 5])
    assert store.memory_log("p").rounds == [1, 2, 3]
    got = rings(store)
    assert same(got[3], [4, 5, 6]) and same(got[1], [2, 3, -INF])
    # Round 1 again starts afresh (the same simulation, rolled back to nothing).
    seen = await play_round(subenv, 1)
    assert seen[1][0] == (), "nothing remembered of the simulation's rolled-back rounds"
    assert store.memory_log("p").rounds == [1]
    assert same(rings(store)[2], [NAN, NAN, 3])


async def test_another_simulation_starts_memory_afresh_and_a_cancelled_round_changes_nothing():
    store = memory_size_store([1, 2], memory_size=3)
    subenv = SubEnvironment(store, AgentSlots(100))
    for number in (1, 2, 3):
        await play_round(subenv, number)

    async def cancelled(number, simulation):
        spec = RoundSpec(
            f"c{number}{simulation}", "p", number, CLASSIC, Stalling(), simulation_id=simulation
        )
        outputs = subenv.run(spec)
        task = asyncio.create_task(outputs.__anext__())
        await spec.policy.stalled.wait()
        assert subenv.cancel(spec.round_id)
        with pytest.raises(RoundCancelled):
            await task

    # Stalling never finishes for agent 0: add it, so the rounds hang until cancelled.
    with store.upload() as up:
        up.add(decode_batch(pb.AgentBatch(population_id="p", agent_ids=[0]), 0))
        up.commit()
    before = rings(store)
    for number, simulation in ((2, "s"), (3, "s"), (4, "s"), (1, "s"), (1, "t")):
        await cancelled(number, simulation)
        after = rings(store)
        assert all(same(after[i], before[i]) for i in before), (number, simulation)
        assert store.memory_log("p").rounds == [1, 2, 3]
    seen = await play_round(subenv, 2, simulation="t", only=[1, 2])
    assert seen[1][0] == (), "another simulation's memory is not shown"
    assert store.memory_log("p").simulation_id == "t"
    assert store.memory_log("p").rounds == [2]
    assert same(rings(store)[1], [NAN, NAN, 3]) and same(rings(store)[0], [NAN, NAN, -INF])


# -- agents moved mid-simulation remember what they would have remembered --------------------

N_MOVING = 40
WINNERS = {1: 33.5, 2: 21.25, 3: 14.0, 4: 9.5, 5: 6.0}


def answer_or_refuse(req):
    """The server's seeded answer, except a deterministic share of prompts it refuses."""
    if stable_fraction(f"refuse|{req.seed}|{req.prompt}") < 0.2:
        return "no idea"
    return default_answer(req)


@pytest.fixture
def llm_server():
    with OpenAIServer(model=MODEL, answer=answer_or_refuse) as running:
        yield running


@pytest.fixture
async def llm_client():
    client = LlmClient(backoff_base_s=0.01)
    yield client
    await client.aclose()


def agent_batch(ids, memory=None):
    ids = np.asarray(ids, dtype=np.int64)
    message = pb.AgentBatch(
        population_id="p",
        agent_ids=ids.tolist(),
        attributes=[
            pb.AttributeColumn(
                name="education", categories=["primary school", "doctorate"], codes=ids % 2
            )
        ],
        personas=[f"agent-{i}" for i in ids.tolist()],
    )
    if memory is not None:
        rounds, values = memory
        message.memory.simulation_id = "S"
        message.memory.rounds.extend(rounds)
        message.memory.values.extend(np.asarray(values, dtype=np.float64).ravel().tolist())
    return message


def llm_store(ids=(), memory=None):
    store = AgentStore(10_000, memory_size=2)
    if len(ids):
        add_agents(store, ids, memory)
    return store


def add_agents(store, ids, memory=None):
    with store.upload() as up:
        up.add(decode_batch(agent_batch(ids, memory), 0))
        up.commit()


class LlmRounds:
    """Plays rounds of simulation S with the LLM policy, noting every agent's prompt and decision
    (NaN: no valid answer) per round."""

    def __init__(self, server, client):
        self.server, self.client = server, client
        self.prompts: dict[int, dict[int, str]] = {}
        self.decided: dict[int, dict[int, float]] = {}

    async def play(self, subenv, number, only=None):
        self.server.reset()
        message = pb.RunRoundRequest(
            round_id=f"S-{number}",
            population_id="p",
            round=number,
            rule=pb.GameRule(ratio=2 / 3, offset=0, min=0, max=100),
            policy=pb.Policy(llm=llm_message(self.server)),
            seed=11,
            simulation_id="S",
            history=[pb.RoundFeedback(round=r, winner=WINNERS[r]) for r in range(1, number)],
        )
        if only is not None:
            message.only.ids.extend(np.asarray(only).tolist())
        chunks, _ = await collect(subenv, round_spec(message, self.client))
        decided = self.decided.setdefault(number, {})
        for chunk in chunks:
            decided.update(zip(chunk.ids.tolist(), chunk.values.tolist(), strict=True))
            decided.update(dict.fromkeys(chunk.invalid_ids.tolist(), NAN))
        prompts = self.prompts.setdefault(number, {})
        for body in self.server.bodies:
            prompt = "\n".join(m["content"] for m in body["messages"])
            prompts[int(AGENT.search(prompt).group(1))] = prompt

    def memory(self, ids, rounds):
        """What the manager persisted: values[i, j] = agent ids[i]'s decision in rounds[j]."""
        return rounds, [[self.decided[r][i] for r in rounds] for i in np.asarray(ids).tolist()]


async def undisturbed(server, client, rounds):
    run = LlmRounds(server, client)
    subenv = SubEnvironment(llm_store(range(N_MOVING)), AgentSlots(8))
    for number in rounds:
        await run.play(subenv, number)
    return run


async def test_agents_moved_to_a_new_store_replay_their_round_as_they_first_would(
    llm_server, llm_client
):
    expected = await undisturbed(llm_server, llm_client, range(1, 6))
    assert any(np.isnan(v) for r in expected.decided.values() for v in r.values()), "refusals"
    assert "you gave no valid number" in "".join(expected.prompts[4].values())

    run = LlmRounds(llm_server, llm_client)
    everyone = np.arange(N_MOVING)
    moving = everyone[1::2]
    first = llm_store(everyone)
    first_env = SubEnvironment(first, AgentSlots(8))
    for number in (1, 2, 3):
        await run.play(first_env, number)
    # The worker hosting the odd agents dies in round 3: they move, with what the manager
    # persisted (rounds 1 and 2), to a process that has never hosted the population.
    first.delete_ids(moving)
    second = llm_store(moving, run.memory(moving, [1, 2]))
    second_env = SubEnvironment(second, AgentSlots(8))
    await run.play(second_env, 3, only=moving)
    assert run.prompts[3] == expected.prompts[3]
    assert same([run.decided[3][i] for i in everyone], [expected.decided[3][i] for i in everyone])
    for number in (4, 5):
        await run.play(first_env, number)
        await run.play(second_env, number)
        assert run.prompts[number] == expected.prompts[number], number
    assert second.memory_log("p").rounds == [3, 4, 5]


async def test_agents_moved_to_a_store_that_played_their_round_replay_it_as_they_first_would(
    llm_server, llm_client
):
    expected = await undisturbed(llm_server, llm_client, range(1, 6))

    run = LlmRounds(llm_server, llm_client)
    everyone = np.arange(N_MOVING)
    staying, moving = everyone[0::2], everyone[1::2]
    survivor, doomed = llm_store(staying), llm_store(moving)
    survivor_env, doomed_env = (
        SubEnvironment(survivor, AgentSlots(8)),
        SubEnvironment(doomed, AgentSlots(8)),
    )
    for number in (1, 2, 3):
        await run.play(survivor_env, number)
        await run.play(doomed_env, number)
    # Round 4: the survivor finishes; the other process dies. Its agents come to the survivor
    # with rounds 1-3 (it remembers 2, but its ring holds 3: rounds 2-4) and round 4 re-runs
    # for them only. They must see rounds 2 and 3, as the undisturbed run did.
    await run.play(survivor_env, 4)
    add_agents(survivor, moving, run.memory(moving, [1, 2, 3]))
    assert survivor.memory_log("p").rounds == [2, 3, 4]
    await run.play(survivor_env, 4, only=moving)
    assert run.prompts[4] == expected.prompts[4]
    assert same([run.decided[4][i] for i in everyone], [expected.decided[4][i] for i in everyone])
    await run.play(survivor_env, 5)
    assert run.prompts[5] == expected.prompts[5]
    assert survivor.memory_log("p").rounds == [3, 4, 5]


async def test_a_manager_replaying_the_round_in_flight_on_restored_agents_gets_the_same_round(
    llm_server, llm_client
):
    expected = await undisturbed(llm_server, llm_client, range(1, 5))
    run = LlmRounds(llm_server, llm_client)
    everyone = np.arange(N_MOVING)
    # A fresh process gets every agent back with rounds 1-3 (round 3 was persisted, then the
    # manager restarted and replays it): round 3 is the log's latest, so it is overwritten.
    restored = llm_store(everyone, expected.memory(everyone, [1, 2, 3]))
    env = SubEnvironment(restored, AgentSlots(8))
    await run.play(env, 3)
    assert run.prompts[3] == expected.prompts[3]
    assert restored.memory_log("p").rounds == [1, 2, 3]
    await run.play(env, 4)
    assert run.prompts[4] == expected.prompts[4]
