"""Prompt templates: only {identifier} is replaced; history lines."""

from __future__ import annotations

import math

import pytest

from worker_server.llm.spec import InvalidLlmRequest
from worker_server.llm.templates import Feedback, Template, fill, history_text, number_text


def test_only_plain_names_are_replaced():
    template = "Hi {persona}! {persona.__class__} {0} {} {{round}} {not-a-name} round {round}"
    out = fill(template, {"persona": "a farmer", "round": "3"})
    assert out == "Hi a farmer! {persona.__class__} {0} {} {3} {not-a-name} round 3"


def test_values_are_inserted_verbatim_never_formatted_again():
    # A value that looks like a placeholder or a format spec stays as it is.
    out = fill("{persona} / {education}", {"persona": "{education} {0!r}", "education": "phd"})
    assert out == "{education} {0!r} / phd"


def test_a_placeholder_without_a_value_is_left_as_written():
    assert fill("{a}-{b}", {"a": "1"}) == "1-{b}"
    assert Template("no placeholders").render({}) == "no placeholders"
    assert Template("{a}{a}").names == ("a", "a")


def test_check_names_the_unknown_placeholder_and_the_field():
    template = Template("You are {persona}, aged {age_value}, {shoe_size}.")
    template.check({"persona", "age_value", "shoe_size"}, "llm.user_template")
    with pytest.raises(InvalidLlmRequest) as err:
        template.check({"persona", "age_value"}, "llm.user_template")
    assert str(err.value) == (
        "llm.user_template: unknown placeholder {shoe_size} (known: age_value, persona)"
    )


def test_numbers_read_naturally():
    assert [number_text(v) for v in (40.0, 23.5, 35.25, 1 / 3, -0.001, 1e6)] == [
        "40",
        "23.5",
        "35.25",
        "0.33",
        "0",
        "1000000",
    ]


def test_history_puts_the_agents_choice_next_to_each_outcome():
    history = [Feedback(1, 23.5, 35.2), Feedback(2, 20.0), Feedback(4, 12.25, 18.0)]
    text = history_text(history, [40.0, -math.inf, math.nan])
    assert text.splitlines() == [
        "Round 1: you chose 40; the winning number was 23.5 (the mean was 35.2).",
        "Round 2: you gave no valid number; the winning number was 20.",
        "Round 4: the winning number was 12.25 (the mean was 18).",
    ]
    assert history_text([], []) == ""
