"""Answer parsing, the constraint texts, and the request bodies per server dialect."""

from __future__ import annotations

import math
import re

import pytest

from worker_server.llm.answers import (
    NumberConstraint,
    extraction_prompt,
    parse_basic,
    parse_cot,
)
from worker_server.llm.protocol import Generation, parse_completion, served_models


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("42", 42.0),
        (" 33.25", 33.25),
        ("Answer: 17", 17.0),
        ("**50**", 50.0),
        ('"7."', 7.0),
        ("-3.5", -3.5),
        ("0", 0.0),
    ],
)
def test_basic_answers_are_the_number(text, value):
    assert parse_basic(text) == value


@pytest.mark.parametrize(
    "text", ["", "forty", "I choose 42", "42 because it is low", "1e400", "nan", "4 2"]
)
def test_anything_else_is_not_a_basic_answer(text):
    assert math.isnan(parse_basic(text))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("The average is about 50, 2/3 of it is 33. Answer: 22", 22.0),
        ("Most pick 50. So my answer is 25.5, final.", 25.5),
        ("Others reason to 10 and 5; I choose 3", 3.0),
        ("Answer: 30\nOn reflection, my number is 20", 20.0),
        ("The game is 2/3 of the average, so 50 then 33 then 22", 22.0),
    ],
)
def test_cot_takes_the_cued_number_else_the_last_one(text, value):
    assert parse_cot(text) == value


def test_cot_without_any_number_is_invalid():
    assert math.isnan(parse_cot("I cannot decide."))


def test_the_extraction_prompt_carries_the_answer_verbatim():
    prompt = extraction_prompt("  I'd go with {forty} two, i.e. 42  ")
    assert "I'd go with {forty} two, i.e. 42\n\nNumber:" in prompt


def test_constraint_fits_the_range():
    classic = NumberConstraint.for_range(0, 100)
    pattern = re.compile(classic.regex)
    for ok in ["42", " 7", "100", "33.33", "0.5", "99.99"]:
        assert pattern.fullmatch(ok), ok
    for bad in ["-1", "101", "100.5", "548", "1000", "3.141", "42 ", "forty", "4,2", "007", "05.5"]:
        assert not pattern.fullmatch(bad), bad


@pytest.mark.parametrize("low, high", [(0, 100), (0, 1), (13, 250), (7, 7), (0, 9), (95, 1003)])
def test_exact_ranges_admit_every_integer_inside_and_none_outside(low, high):
    pattern = re.compile(NumberConstraint.for_range(low, high).regex)
    for n in range(0, 1200):
        assert bool(pattern.fullmatch(str(n))) == (low <= n <= high), n


def test_other_ranges_cap_the_digits():
    pattern = re.compile(NumberConstraint.for_range(-50, 50).regex)
    for ok in ["-50", "42", "-7.5", "99"]:
        assert pattern.fullmatch(ok), ok
    assert not pattern.fullmatch("-100")


@pytest.mark.parametrize("low, high", [(0, 100), (0.5, 7.5), (13, 250), (-50, 50)])
def test_integer_answers_admit_whole_numbers_only(low, high):
    constraint = NumberConstraint.for_range(low, high, integers=True)
    pattern = re.compile(constraint.regex)
    exact = low >= 0  # other ranges only cap the digits
    for n in range(-60, 300):
        inside = low <= n <= high
        assert bool(pattern.fullmatch(str(n))) == inside or (not exact and abs(n) < 100), n
        assert (
            not pattern.fullmatch(f"{n}.5")
            and not pattern.fullmatch(f"{n}.")
            and not (constraint.is_prefix(f"{n}."))
        ), n
    assert "." not in constraint.grammar


def test_integer_grammar():
    assert NumberConstraint.for_range(0, 100, integers=True).grammar == (
        'root ::= " "? ([0-9] | [1-9] [0-9] | "1" "0" "0")\n'
    )
    assert NumberConstraint.for_range(-5, 5, integers=True).grammar == 'root ::= " "? "-"? [0-9]\n'


def test_grammar_is_gbnf_without_repetition_ranges():
    assert NumberConstraint.for_range(0, 100).grammar == (
        'root ::= " "? ([0-9] ("." [0-9] [0-9]?)? | [1-9] [0-9] ("." [0-9] [0-9]?)? | "1" "0" "0")\n'
    )
    assert NumberConstraint.for_range(-5, 5).grammar == (
        'root ::= " "? "-"? [0-9] ("." [0-9] [0-9]?)?\n'
    )


def test_bodies_per_api_and_server():
    constraint = NumberConstraint.for_range(0, 100)
    chat = Generation(
        api="chat", model="m", system="rules", user="go", max_tokens=8, temperature=0.5,
        seed=2**40 + 5, constraint=constraint,
    )  # fmt: skip
    assert chat.path == "/v1/chat/completions"
    assert chat.body("openai") == {
        "model": "m",
        "messages": [
            {"role": "system", "content": "rules"},
            {"role": "user", "content": "go"},
        ],
        "max_tokens": 8,
        "temperature": 0.5,
        "seed": 5,  # reduced to 31 bits
    }
    assert chat.body("llama_cpp")["grammar"] == constraint.grammar
    vllm = chat.body("vllm")
    assert vllm["structured_outputs"] == {"regex": constraint.regex}
    assert "guided_regex" not in vllm, "removed in vLLM 0.12: it would be ignored"

    base = Generation(api="completions", model="gemma", system="rules", user="go")
    assert base.path == "/v1/completions"
    assert base.body("llama_cpp")["prompt"] == "rules\n\ngo"
    assert "grammar" not in base.body("llama_cpp"), "no constraint asked for"
    assert Generation(api="completions", model="g", user="go").body("openai")["prompt"] == "go"
    assert "messages" not in base.body("openai")


def test_completions_parse_with_usage():
    chat = {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "42"}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
    }
    assert parse_completion("chat", chat).text == "42"
    assert parse_completion("chat", chat).prompt_tokens == 10
    plain = {"choices": [{"text": " 7"}]}
    completion = parse_completion("completions", plain)
    assert (completion.text, completion.prompt_tokens, completion.completion_tokens) == (" 7", 0, 0)
    assert parse_completion("chat", {"choices": [{"message": {"content": None}}]}).text == ""
    for bad in [[], {"choices": []}, {"choices": [{"text": 5}]}, {"error": "x"}]:
        with pytest.raises(ValueError):
            parse_completion("completions", bad)
    assert served_models({"object": "list", "data": [{"id": "a"}, {"id": "b"}]}) == ["a", "b"]
    with pytest.raises(ValueError):
        served_models({"models": []})
