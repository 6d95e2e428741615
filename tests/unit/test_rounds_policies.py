"""Policies: synthetic and level-k, seeded per agent so placement never changes a decision."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from tests.support_rounds import CLASSIC, cohort, make_store
from worker_server.rounds import (
    AgentSlots,
    GameRule,
    InvalidRound,
    LevelKPolicy,
    PartialAggregate,
    RoundContext,
    RoundSpec,
    SubEnvironment,
    SyntheticPolicy,
    randomness,
)

HALF_PLUS_5 = GameRule(ratio=0.5, offset=5.0, min=0.0, max=100.0)
DEPTHS = {"primary school": 0, "bachelor": 1, "master": 2, "doctorate": 3}


async def play(subenv, spec) -> tuple[dict[int, float], PartialAggregate]:
    decisions: dict[int, float] = {}
    aggregate = None
    async for out in subenv.run(spec):
        if isinstance(out, PartialAggregate):
            aggregate = out
        else:
            decisions.update(zip(out.ids.tolist(), out.values.tolist(), strict=True))
    assert aggregate is not None
    return decisions, aggregate


def test_uniforms_depend_only_on_seed_round_stream_and_id():
    ids = np.arange(10_000, dtype=np.int64) * 13 - 5000
    whole = randomness.uniforms(7, 3, 1, ids)
    assert whole.min() >= 0 and whole.max() < 1
    assert abs(whole.mean() - 0.5) < 0.02
    shuffled = np.random.default_rng(0).permutation(len(ids))
    assert np.array_equal(randomness.uniforms(7, 3, 1, ids[shuffled]), whole[shuffled])
    for other in ((8, 3, 1), (7, 4, 1), (7, 3, 2)):
        assert not np.allclose(randomness.uniforms(*other, ids), whole)
    normals = randomness.normals(7, 3, ids)
    assert abs(normals.mean()) < 0.05 and abs(normals.std() - 1) < 0.05


async def test_synthetic_waits_once_per_cohort_without_blocking_the_loop():
    store = make_store(range(5000))
    policy = SyntheticPolicy(latency_s=0.3)
    context = RoundContext(1, 42, CLASSIC, None)
    first = asyncio.ensure_future(policy.decide(cohort(store), context))
    second = asyncio.ensure_future(policy.decide(cohort(store), context))
    # One pass of the loop later, both cohorts are waiting at once and the loop is free to run
    # this test: their waits overlap instead of blocking, one after the other.
    await asyncio.sleep(0)
    assert not first.done() and not second.done(), "two cohorts wait concurrently"
    a, b = await asyncio.gather(first, second)
    assert np.array_equal(a, b)
    assert a.min() >= 0 and a.max() <= 100 and 45 < a.mean() < 55


def test_level_k_depth_comes_from_the_attribute():
    store = make_store(range(8))
    policy = LevelKPolicy("education", DEPTHS, default_depth=1, noise_std=0.0)
    values = asyncio.run(policy.decide(cohort(store), RoundContext(1, 0, CLASSIC, None)))
    # Depth 0 anchors on the middle of the range, each level multiplies by 2/3.
    expected = [50 * (2 / 3) ** d for d in (0, 1, 2, 3)] * 2
    assert np.allclose(values, expected)
    anchored = asyncio.run(policy.decide(cohort(store), RoundContext(2, 0, HALF_PLUS_5, 30.0)))
    assert np.allclose(anchored[:4], [30, 20, 15, 12.5])
    flat = LevelKPolicy("", {}, default_depth=2, noise_std=0.0)
    assert np.allclose(asyncio.run(flat.decide(cohort(store), RoundContext(1, 0, CLASSIC, 90))), 40)


def test_level_k_rejects_bad_settings_and_unknown_attributes():
    store = make_store(range(8))
    with pytest.raises(InvalidRound, match="not an attribute"):
        LevelKPolicy("income", {}, 1, 0.0).check(store.population("p"))
    with pytest.raises(InvalidRound, match="default_depth"):
        LevelKPolicy("", {}, -1, 0.0)
    with pytest.raises(InvalidRound, match="depth_by_category"):
        LevelKPolicy("education", {"master": 1000}, 1, 0.0)
    with pytest.raises(InvalidRound, match="noise_std"):
        LevelKPolicy("", {}, 1, float("nan"))
    with pytest.raises(InvalidRound, match="latency_s"):
        SyntheticPolicy(-1.0)


async def repeated_rounds(rule, rounds, noise_std=2.0, n=4000):
    """Feed back the winning number (target) each round; returns the mean of each round."""
    store = make_store(range(n))
    subenv = SubEnvironment(store, AgentSlots(1_000_000))
    policy = LevelKPolicy("education", DEPTHS, default_depth=1, noise_std=noise_std)
    feedback, means = None, []
    for r in range(1, rounds + 1):
        spec = RoundSpec(f"r{r}", "p", r, rule, policy, feedback=feedback, seed=11)
        _, aggregate = await play(subenv, spec)
        mean = aggregate.sum / aggregate.count
        means.append(mean)
        feedback = rule.ratio * mean + rule.offset
    return means, store


async def test_level_k_converges_near_10_under_half_plus_5():
    means, store = await repeated_rounds(HALF_PLUS_5, 6)
    assert abs(means[-1] - 10) < 2, means
    assert abs(means[0] - 10) > 5, "it starts far from the equilibrium"
    memory = store.list_agents("p", None, 1)[0][0].memory
    assert len(memory) == 6, "every round's decision is remembered"


async def test_level_k_mean_falls_every_round_under_two_thirds():
    means, _ = await repeated_rounds(CLASSIC, 6, noise_std=1.0)
    assert all(later < earlier for earlier, later in zip(means, means[1:], strict=False)), means


@pytest.mark.parametrize(
    "policy",
    [SyntheticPolicy(latency_s=0.0), LevelKPolicy("education", DEPTHS, 1, noise_std=5.0)],
    ids=["synthetic", "level_k"],
)
async def test_same_seed_gives_the_same_decisions_however_agents_are_placed(policy):
    ids = np.arange(30_000, dtype=np.int64) * 7 + 3
    spec = RoundSpec("r", "p", 3, CLASSIC, policy, feedback=40.0, seed=99)
    whole, _ = await play(SubEnvironment(make_store(ids), AgentSlots(1_000_000)), spec)

    # Three processes, agents dealt at random, each with its own small concurrency cap.
    owner = np.random.default_rng(1).integers(0, 3, len(ids))
    split: dict[int, float] = {}
    for k, cap in zip(range(3), (1, 777, 5000), strict=True):
        store = make_store(ids[owner == k])
        part, _ = await play(SubEnvironment(store, AgentSlots(max(cap, 1000))), spec)
        split.update(part)
    assert split == whole
    other_seed, _ = await play(
        SubEnvironment(make_store(ids), AgentSlots(1_000_000)),
        RoundSpec("r", "p", 3, CLASSIC, policy, feedback=40.0, seed=100),
    )
    assert other_seed != whole
