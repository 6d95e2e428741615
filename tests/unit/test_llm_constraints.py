"""The LLM layer's constraint interface (worker_server.llm.constraints): a choice among named
options is constrained, parsed, extracted and read as a distribution by the same request layer
that serves numbers, against a real HTTP server speaking vLLM's dialect."""

from __future__ import annotations

import itertools
import math
import re

import pytest

from bench.openai_server import OpenAIServer
from worker_server.llm import LlmClient
from worker_server.llm.answering import AnswerSettings, answer
from worker_server.llm.answers import NumberConstraint
from worker_server.llm.constraints import AnswerConstraint, ChoiceConstraint
from worker_server.llm.distribution import _Tree, can_read
from worker_server.llm.spec import EndpointSpec

MODEL = "test-model"
GO_STAY = ChoiceConstraint(("go", "stay"))


def test_both_shapes_are_answer_constraints():
    shapes: list[AnswerConstraint] = [GO_STAY, NumberConstraint.for_range(0, 100)]
    for shape in shapes:
        assert shape.accepts(" " + ("go" if shape is GO_STAY else "42"))
        assert " " in shape.next_characters


@pytest.mark.parametrize(
    "options", [("go", "stay"), ("yes", "no"), ("a", "ab", "b c"), ('say "hi"', "back\\slash")]
)
def test_accepts_is_the_regex_and_is_prefix_is_exactly_the_prefixes(options):
    constraint = ChoiceConstraint(options)
    pattern = re.compile(constraint.regex)
    alphabet = sorted(set(" ".join(options)) | {"x"})
    texts = ["".join(t) for n in range(5) for t in itertools.product(alphabet, repeat=n)]
    texts += [o for o in options] + [" " + o for o in options]
    whole = {t for t in texts if constraint.accepts(t)}
    assert whole == {t for t in texts if pattern.fullmatch(t)}
    assert whole == set(options) | {" " + o for o in options}
    prefixes = {w[:i] for w in whole for i in range(len(w) + 1)}
    for text in texts:
        assert constraint.is_prefix(text) == (text in prefixes), text


def test_the_servers_dialects():
    assert GO_STAY.body_fields("llama_cpp") == {"grammar": 'root ::= " "? ("go" | "stay")\n'}
    assert GO_STAY.body_fields("vllm") == {"structured_outputs": {"choice": ["go", "stay"]}}
    assert GO_STAY.body_fields("openai") == {}
    quoted = ChoiceConstraint(('say "hi"', "a\\b"))
    assert quoted.grammar == 'root ::= " "? ("say \\"hi\\"" | "a\\\\b")\n'


@pytest.mark.parametrize(
    ("text", "value"),
    [("go", 0), (" stay", 1), ("Stay.", 1), ("**go**", 0), ("Answer: stay", 1), ('"GO"', 0)],
)
def test_a_basic_answer_is_an_option_and_its_value_the_index(text, value):
    assert GO_STAY.parse(text, "basic") == value


@pytest.mark.parametrize("text", ["", "gone", "go stay", "I go", "maybe"])
def test_anything_else_is_no_basic_answer(text):
    assert math.isnan(GO_STAY.parse(text, "basic"))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("Many will go, so I choose to stay, even if staying is dull.", 1),
        ("Stay home? No: my decision: **go**. Others may stay.", 0),
        ("I could stay, but I'll go", 0),  # no cue: the last option named
        ("Ongoing traffic, so stay", 1),  # options are whole words ("go" is not in "Ongoing")
    ],
)
def test_reasoning_gives_the_cued_option_else_the_last_named(text, value):
    assert GO_STAY.parse(text, "cot") == value


def test_no_option_named_is_no_answer():
    assert math.isnan(GO_STAY.parse("I cannot decide today.", "cot"))


@pytest.mark.parametrize("options", [(), ("go", "Go"), (" go", "stay"), ("go", ""), ("a\nb",)])
def test_options_must_be_distinct_printable_words(options):
    with pytest.raises(ValueError):
        ChoiceConstraint(options)


def test_the_extraction_prompt_names_the_options_and_keeps_the_answer_verbatim():
    prompt = GO_STAY.extraction_prompt("  I'd {go}, surely  ")
    assert "one of: go, stay" in prompt
    assert "I'd {go}, surely\n" in prompt and "{answer}" not in prompt


def test_only_numbers_are_read_as_a_distribution_a_choice_is_asked():
    def settings(constraint) -> AnswerSettings:
        return AnswerSettings("completions", "basic", 4, 1.0, 10, 0, False, constraint)

    assert can_read(settings(NumberConstraint.for_range(0, 100)))
    assert not can_read(settings(GO_STAY))


def test_the_tree_walks_answers_spelled_over_several_tokens():
    # The tree itself takes any constraint (numbers' tokens span characters too, " 4" or "42").
    tree = _Tree(GO_STAY, temperature=1.0)
    # After " " the model may start either option or write something else (dropped).
    tree.expand("", {" ": math.log(0.6), " go": math.log(0.2), "x": math.log(0.2)})
    tree.expand(" ", {"st": math.log(0.5), "g": math.log(0.25), "no": math.log(0.25)})
    tree.expand(" st", {"ay": math.log(0.9), "op": math.log(0.1)})
    tree.expand(" g", {"o": math.log(1.0)})
    assert not tree.pending  # " go" and " stay" are whole: nothing can extend them
    read = tree.result(0.0)
    # Kept at the root: " " 3/4, " go" 1/4; under " ": "st" 2/3, "g" 1/3.
    assert read.values.tolist() == [0.0, 1.0]
    assert read.probabilities.tolist() == pytest.approx([0.25 + 0.75 / 3, 0.75 * 2 / 3])
    assert read.texts == (" go", " stay")


@pytest.mark.parametrize("api", ["completions", "chat"])
async def test_an_agent_answers_a_choice_through_the_vllm_dialect(api):
    with OpenAIServer(model=MODEL, validate="vllm") as server:
        # Unconstrained, the stand-in would answer a number: it must honour the choice.
        server.behaviour.answer = lambda request: "42"
        client = LlmClient(backoff_base_s=0.01)
        route = client.routes([EndpointSpec(server.base_url, MODEL, 4, server="vllm")])[MODEL]
        settings = AnswerSettings(
            api=api, answer_mode="basic", max_tokens=4, temperature=0.7, timeout_s=10,
            max_retries=0, extraction_call=False, constraint=GO_STAY,
        )  # fmt: skip
        try:
            answers = [
                await answer(client, route, settings, "El Farol", f"agent {i}", seed=i)
                for i in range(8)
            ]
        finally:
            await client.aclose()
        assert {r.status for r in server.records} == {200}
        assert server.bodies[-1]["structured_outputs"] == {"choice": ["go", "stay"]}
    assert all(a.text in ("go", "stay") for a in answers), [a.text for a in answers]
    assert [a.value for a in answers] == [float(a.text == "stay") for a in answers]
