"""A plugin run's transcripts say why an action was invalid in the action's own words."""

from __future__ import annotations

from backend.simulations.transcripts import PromptBuilder


def _builder(plugin: str, **config) -> PromptBuilder:
    return PromptBuilder({"population_id": 1, "rounds": 2, "plugin": {"name": plugin}} | config)


def test_a_rule_policys_invalid_value_is_named_in_the_actions_words():
    assert (
        _builder("el_farol").reason("invalid", None) == "the policy's value is not one of go, stay"
    )
    assert _builder("public_goods").reason("invalid", None) == (
        "the policy's value is not a whole number in [0, 20]"
    )
    assert _builder("el_farol").reason("valid", None) is None


def test_an_llm_agents_invalid_answer_is_named_too():
    policy = {"kind": "llm", "endpoints": [{"base_url": "http://127.0.0.1:9", "model": "m"}]}
    builder = _builder("el_farol", policy=policy)
    assert builder.reason("invalid", "maybe") == "the answer is not one of go, stay"
    assert "raw answers were not stored" in builder.reason("invalid", None)
    assert "the LLM request failed" in builder.reason("invalid", "")
