"""The rules that say what agents with one prompt cost (worker_server.llm.accounting), which the
workers answer by and the manager's estimate counts with, and the estimate's model of how
agents' own choices split a shared prompt in later rounds (backend.simulations.estimate)."""

from __future__ import annotations

import pytest

from backend.simulations.config import LlmPolicyConfig
from backend.simulations.estimate import _expected_cost
from worker_server.llm.accounting import (
    ASK_BEFORE_READING,
    PromptCost,
    answering_mode,
    prompt_cost,
)
from worker_server.llm.answers import NumberConstraint
from worker_server.llm.distribution import MAX_NODES, read_requests_at_most


def test_the_answering_mode_follows_temperature_and_whether_a_read_is_possible():
    assert answering_mode(0.7, each_agent_asks=True, readable=True) == "per_agent"
    assert answering_mode(0.0, each_agent_asks=False, readable=False) == "shared"
    assert answering_mode(0.7, each_agent_asks=False, readable=True) == "exchangeable"
    assert answering_mode(0.7, each_agent_asks=False, readable=False) == "per_agent"


def test_a_prompt_few_agents_share_is_asked_and_one_many_share_is_read_once():
    assert prompt_cost("per_agent", 30) == PromptCost(30, 0)
    assert prompt_cost("shared", 30) == PromptCost(1, 0)
    assert prompt_cost("exchangeable", ASK_BEFORE_READING) == PromptCost(ASK_BEFORE_READING, 0)
    assert prompt_cost("exchangeable", ASK_BEFORE_READING + 1) == PromptCost(0, 1)
    assert prompt_cost("exchangeable", 10**6) == PromptCost(0, 1)
    assert prompt_cost("shared", 0) == PromptCost(0, 0)


def test_a_read_costs_at_most_the_prefixes_of_its_answers():
    # Whole numbers 0..100, optionally after a space: the root, " ", 1-9, " 1"-" 9", 10, " 10"
    # (0, two-digit numbers but 10, and 100 end the answer: no request).
    whole = NumberConstraint.for_range(0, 100, integers=True)
    assert read_requests_at_most(whole, batch_size=1) == (22, 22)
    # Prompt arrays of 16: one request a level of the tree (1, 10, 10 and 1 prefixes).
    assert read_requests_at_most(whole, batch_size=16) == (4, 22)
    # Two decimals: more prefixes than a read asks about.
    assert read_requests_at_most(NumberConstraint.for_range(0, 100), 1) == (MAX_NODES, MAX_NODES)


def test_agents_split_by_their_own_choices_cost_between_one_prompt_and_each_their_own():
    # No history yet: the prompt's own cost.
    assert _expected_cost("exchangeable", 500, 0, 101) == (0, 1)
    asks, reads = _expected_cost("exchangeable", 500, 1, 101)
    assert 0 < asks < 500 and 1 < reads < 500 / ASK_BEFORE_READING
    # Every remembered round splits them further, towards every agent asking.
    more_asks, _ = _expected_cost("exchangeable", 500, 3, 101)
    assert asks < more_asks <= 500
    assert _expected_cost("exchangeable", 500, 8, 101)[0] == pytest.approx(500, rel=0.05)
    # Few agents: all ask, whatever the history.
    assert _expected_cost("exchangeable", 5, 2, 101) == pytest.approx((5, 0), abs=1e-9)
    # Greedy answers never split a prompt; per-agent answers cost an agent each anyway.
    assert _expected_cost("shared", 500, 4, 101) == (1, 0)
    assert _expected_cost("per_agent", 500, 4, 101) == (500, 0)


def test_the_config_names_the_mode_the_workers_answer_by():
    endpoint = {"base_url": "http://llm:8000", "model": "m"}
    cases = [
        ({"api": "completions", "temperature": 0.7}, "basic", "exchangeable"),
        ({"api": "completions", "temperature": 0.7}, "cot", "per_agent"),
        ({"api": "chat", "temperature": 0.7}, "basic", "per_agent"),
        ({"api": "chat", "temperature": 0.0}, "cot", "shared"),
        ({"api": "completions", "identical_prompts": "each_asks"}, "basic", "per_agent"),
    ]
    for fields, answer_mode, expected in cases:
        policy = LlmPolicyConfig(kind="llm", endpoints=[endpoint], **fields)
        assert policy.answering_mode(answer_mode) == expected, (fields, answer_mode)
