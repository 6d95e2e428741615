"""Mixed policies: the assignment of agents to parts (exact counts, seeded, placement-free), the
worker's split of a cohort into sub-cohorts, and the config's checks naming the field."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from pydantic import ValidationError

from backend.simulations.config import SimulationConfig
from backend.simulations.mixture import AgentParts, assignment_record, by_policy
from backend.simulations.spec import llm_message, per_worker_requests, policy_proto
from populace.plugin import INVALID, LATE, VALID
from tests.support_rounds import CLASSIC, cohort, make_store
from worker_server.rounds import LevelKPolicy, RoundContext, SyntheticPolicy
from worker_server.rounds.assignment import AttributeAssignment, ShareAssignment, affine_key
from worker_server.rounds.errors import InvalidRound
from worker_server.rounds.mixed import MixedPolicy
from worker_server.rounds.wire import mixed_policy
from worker_server.rpc import worker_pb2 as pb

ENDPOINTS = [{"base_url": "http://127.0.0.1:9", "model": "m", "max_concurrency": 10}]


@pytest.mark.parametrize("n", [1, 2, 7, 10, 1000, 12_345, 2**20])
def test_shares_give_exact_counts_and_a_permutation(n):
    shares = [0.1, 0.25, 0.65]
    rule = ShareAssignment.seeded(99, shares, n)
    assert rule.check() is None
    parts = rule.parts(np.arange(n))
    counts = np.bincount(parts, minlength=3).tolist()
    assert counts == rule.counts
    assert sum(counts) == n
    assert rule.counts == np.diff([0, *(round(c * n) for c in np.cumsum(shares))]).tolist()[:2] + [
        n - round(0.35 * n)
    ]
    # The affine map is a permutation of 0..n-1.
    multiplier, offset = affine_key(99, n)
    permuted = (np.arange(n, dtype=np.uint64) * multiplier + offset) % n
    assert len(np.unique(permuted)) == n


def test_the_assignment_depends_on_the_seed_and_the_agent_alone():
    n = 10_000
    rule = ShareAssignment.seeded(5, [0.1, 0.9], n)
    ids = (np.int64(3) << 32) | np.arange(n, dtype=np.int64)
    whole = rule.parts(ids & 0xFFFFFFFF)
    # Any split of the agents (two workers, small cohorts, shuffled) gives each the same part.
    order = np.random.default_rng(1).permutation(n)
    assert np.array_equal(rule.parts(order), whole[order])
    assert np.array_equal(ShareAssignment.seeded(5, [0.1, 0.9], n).parts(np.arange(n)), whole)
    other = ShareAssignment.seeded(6, [0.1, 0.9], n).parts(np.arange(n))
    assert not np.array_equal(other, whole)
    # Not a block of consecutive numbers: the LLM tenth is spread over the population.
    llm = np.flatnonzero(whole == 0)
    assert len(llm) == 1000 and llm.max() - llm.min() > n / 2


def test_by_attribute_the_category_picks_the_part_and_the_rest_play_the_default():
    rule = AttributeAssignment("education", {"master": 0, "doctorate": 1}, 2)
    categories = ["primary school", "bachelor", "master", "doctorate"]
    codes = np.array([0, 1, 2, 3, 2, 4])  # 4: no value
    assert rule.parts(codes, categories).tolist() == [2, 2, 0, 1, 0, 2]
    counts = rule.counts({"master": 5, "doctorate": 3, "bachelor": 4}, 20, 3)
    assert counts == [5, 3, 12]


def _mixed(n: int) -> MixedPolicy:
    rule = ShareAssignment.seeded(3, [0.3, 0.7], n)
    synthetic = SyntheticPolicy(latency_s=0.0)
    level_k = LevelKPolicy("", {}, default_depth=2, noise_std=0.0)
    return MixedPolicy([synthetic, level_k], ["synthetic", "level_k"], rule)


def test_a_cohort_is_split_by_part_and_merged_back_in_cohort_order():
    n = 2000
    store = make_store(range(n))
    policy = _mixed(n)
    context = RoundContext(1, 42, CLASSIC, None)
    whole = cohort(store)
    values = asyncio.run(policy.decide(whole, context)).values
    parts = policy.assignment.parts(np.arange(n))
    level_k = 50 * (2 / 3) ** 2
    assert np.allclose(values[parts == 1], level_k)
    synthetic = asyncio.run(SyntheticPolicy(0.0).decide(whole, context))
    assert np.array_equal(values[parts == 0], synthetic[parts == 0])
    assert (parts == 0).sum() == 600
    # Cohorts cut anywhere give every agent the same value.
    halves = [
        asyncio.run(policy.decide(type(whole)(whole.population, rows), context)).values
        for rows in (np.arange(0, 777), np.arange(777, n))
    ]
    assert np.array_equal(np.concatenate(halves), values)


def test_the_worker_refuses_a_nested_or_inconsistent_mixture():
    inner = pb.Policy(synthetic=pb.SyntheticPolicy())
    nested = pb.MixedPolicy(
        parts=[pb.MixedPart(label="a", policy=pb.Policy(mixed=pb.MixedPolicy()), bound=4)],
        population_size=4,
        multiplier=1,
    )
    with pytest.raises(InvalidRound, match=r"parts\[0\].policy: a mixed policy cannot nest"):
        mixed_policy(nested, None, None)
    bad_bounds = pb.MixedPolicy(
        parts=[pb.MixedPart(label="a", policy=inner, bound=3)], population_size=4, multiplier=1
    )
    with pytest.raises(InvalidRound, match="bounds must rise to population_size"):
        mixed_policy(bad_bounds, None, None)
    not_coprime = pb.MixedPolicy(
        parts=[pb.MixedPart(label="a", policy=inner, bound=4)], population_size=4, multiplier=2
    )
    with pytest.raises(InvalidRound, match="coprime"):
        mixed_policy(not_coprime, None, None)


def _config(policy: dict, plugin: str = "public_goods") -> SimulationConfig:
    return SimulationConfig.model_validate(
        {"population_id": 1, "rounds": 2, "plugin": {"name": plugin}, "policy": policy}
    )


def _error(policy: dict, plugin: str = "public_goods") -> tuple[tuple, str]:
    with pytest.raises(ValidationError) as caught:
        _config(policy, plugin)
    first = caught.value.errors()[0]
    return first["loc"], first["msg"]


TENTH_LLM = {
    "kind": "mixed",
    "shares": [
        {"share": 0.1, "policy": {"kind": "llm", "endpoints": ENDPOINTS}},
        {"share": 0.9, "policy": {"kind": "free_rider"}},
    ],
}


def test_a_mixed_config_names_its_parts_and_its_llm_part():
    config = _config(TENTH_LLM)
    assert [p.label for p in config.policy_parts] == ["llm", "free_rider"]
    assert config.llm_policy is not None and config.llm_policy.endpoints[0].model == "m"
    record = assignment_record(config, 7, 1000, {})
    assert [(r["label"], r["agents"], r["share"]) for r in record] == [
        ("llm", 100, 0.1),
        ("free_rider", 900, 0.9),
    ]
    message = policy_proto(config, 7, 1000)
    assert [p.bound for p in message.mixed.parts] == [100, 1000]
    assert llm_message(message).default_model == "m"
    # The endpoint's total concurrency is split between workers inside the mixture too.
    request = pb.RunRoundRequest(policy=message)
    split = per_worker_requests(request, ["a", "b"])
    assert [llm_message(r.policy).endpoints[0].max_concurrency for r in split.values()] == [5, 5]


def test_bad_mixtures_are_refused_naming_the_field():
    short = {**TENTH_LLM, "shares": [{**TENTH_LLM["shares"][0], "share": 0.2}, {"share": 0.7, "policy": {"kind": "free_rider"}}]}  # fmt: skip
    loc, msg = _error(short)
    assert loc[-1] == "shares" and "add up to 0.9" in msg
    loc, msg = _error(
        {"kind": "mixed", "shares": [{"share": 1, "policy": {"kind": "mixed", "shares": []}}]}
    )
    assert loc[-2:] == (0, "policy") and "not another mixed" in msg
    loc, msg = _error({"kind": "mixed", "shares": [{"share": 1, "policy": {"kind": "level_k"}}]})
    assert loc == ("policy", "shares", 0, "policy", "kind") and "no policy 'level_k'" in msg
    loc, msg = _error({"kind": "mixed", "attribute": "education", "default": {"kind": "free_rider"}})  # fmt: skip
    assert loc[-1] == "by_category" and "required" in msg
    two_llms = {
        "kind": "mixed",
        "shares": [
            {"share": 0.5, "policy": {"kind": "llm", "endpoints": ENDPOINTS}},
            {"share": 0.5, "policy": {"kind": "llm", "endpoints": ENDPOINTS}},
        ],
    }
    loc, msg = _error(two_llms)
    assert loc == ("policy", "shares", 1, "policy", "kind") and "at most one llm" in msg


def test_rounds_break_down_by_policy_exactly():
    n = 10
    rule = ShareAssignment.seeded(1, [0.5, 0.5], n)
    parts = AgentParts(("a", "b"), rule)
    ids = np.arange(n, dtype=np.int64)
    values = np.arange(n, dtype=np.float64)
    status = np.array([VALID] * 7 + [INVALID, LATE, VALID], dtype=np.uint8)
    out = by_policy(parts, ids, np.where(status == VALID, values, np.nan), status)
    of = rule.parts(ids)
    assert out["a"]["agents"] == out["b"]["agents"] == 5
    for i, label in enumerate(("a", "b")):
        valid = (of == i) & (status == VALID)
        assert out[label]["n_valid"] == valid.sum()
        assert out[label]["mean"] == pytest.approx(values[valid].mean())
    assert out["a"]["n_invalid"] + out["b"]["n_invalid"] == 1
    assert out["a"]["n_late"] + out["b"]["n_late"] == 1


def test_only_the_llm_part_of_a_mixed_run_can_be_interviewed():
    from types import SimpleNamespace

    from backend.interviews.service import InterviewRefused, _check_plays_llm

    config = _config(TENTH_LLM)
    simulation = SimpleNamespace(id=3, seed=7)
    rule = ShareAssignment.seeded(7, [0.1, 0.9], 1000)
    parts = rule.parts(np.arange(1000))
    llm_agent = SimpleNamespace(id=(1 << 32) | int(np.flatnonzero(parts == 0)[0]), attributes={})
    rule_agent = SimpleNamespace(id=(1 << 32) | int(np.flatnonzero(parts == 1)[0]), attributes={})
    _check_plays_llm(config, simulation, llm_agent, 1000)
    with pytest.raises(InterviewRefused, match="played 'free_rider'"):
        _check_plays_llm(config, simulation, rule_agent, 1000)
    by_attribute = _config(
        {
            "kind": "mixed",
            "attribute": "education",
            "by_category": {"master": {"kind": "llm", "endpoints": ENDPOINTS}},
            "default": {"kind": "free_rider"},
        }
    )
    master = SimpleNamespace(id=1, attributes={"education": "master"})
    _check_plays_llm(by_attribute, simulation, master, 1000)
    with pytest.raises(InterviewRefused):
        _check_plays_llm(by_attribute, simulation, SimpleNamespace(id=2, attributes={}), 1000)
