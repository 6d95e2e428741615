"""Templates user input controls are refused before any work when they could render too much:
no conversion or format spec in a persona template, and a bound on what every template renders to.
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from backend.populations.config import Distribution, PopulationConfig, render_persona_template
from backend.simulations.config import SimulationConfig
from worker_server.agents.errors import InvalidBatch
from worker_server.agents.wire import decode_batch
from worker_server.llm.personas import persona_job
from worker_server.llm.spec import InvalidLlmRequest
from worker_server.llm.templates import (
    MAX_PERSONA_CHARS,
    MAX_PROMPT_CHARS,
    Template,
    round_placeholder_limits,
)
from worker_server.rpc import worker_pb2 as pb

EDUCATION = [{"name": "education", "categories": [{"name": "a", "weight": 1}]}]


def population(template: str, **persona) -> dict:
    return {
        "name": "tpl",
        "size": 10,
        "distributions": EDUCATION,
        "persona": {"mode": "template", "template": template, **persona},
    }


def errors_at(config: dict, model=PopulationConfig) -> list[dict]:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(config)
    return caught.value.errors()


@pytest.mark.parametrize(
    "template",
    [
        "You are {education:>10000000000}.",
        "You are {education!r}.",
        "You are {education!s:^9}.",
        "You are {education:{education}}.",
    ],
)
def test_a_conversion_or_format_spec_is_refused_naming_the_field(template):
    (error,) = errors_at(population(template))
    assert error["loc"] == ("persona", "template")
    assert "must be a plain name like {education}" in error["msg"]


def test_the_metaprompt_is_held_to_plain_names_too():
    config = population(
        "You are {education}.",
        mode="llm",
        metaprompt="Write about {education:>99999999}",
        endpoint="http://127.0.0.1:9/v1",
        model="m",
    )
    (error,) = errors_at(config)
    assert error["loc"] == ("persona", "metaprompt")
    assert "format specs" in error["msg"]


def test_a_persona_that_could_render_past_the_limit_is_refused():
    long_name = "x" * 200
    config = population("{education}" * 101)
    config["distributions"] = [
        {"name": "education", "categories": [{"name": long_name, "weight": 1}]}
    ]
    (error,) = errors_at(config)
    assert error["loc"] == ("persona", "template")
    assert f"{101 * 200:,} characters" in error["msg"]
    assert f"{MAX_PERSONA_CHARS:,}" in error["msg"]
    # One fewer fits exactly.
    config["persona"]["template"] = "{education}" * 100
    assert PopulationConfig.model_validate(config).persona.template


def test_a_bin_value_counts_its_longest_end():
    age = Distribution.model_validate(
        {"name": "age", "bins": [{"name": "old", "min": -(2**31), "max": 5, "weight": 1}]}
    )
    assert age.value_chars() == {"age": 3, "age_value": len(str(-(2**31)))}


def test_rendering_fills_names_and_unescapes_braces_without_formatting():
    assert render_persona_template("{{x}} {a} and {b}", {"a": "1", "b": "{c}"}) == "{x} 1 and {c}"


def test_a_prompt_of_many_personas_is_refused_at_launch():
    config = {
        "population_id": 1,
        "rounds": 1,
        "policy": {"kind": "synthetic"},
        "prompt": {"user_template": "{persona}" * 6},
    }
    (error,) = errors_at(config, SimulationConfig)
    assert error["loc"] == ("prompt", "user_template")
    assert f"{MAX_PROMPT_CHARS:,}" in error["msg"]
    config["prompt"]["user_template"] = "{persona} {history}"
    assert SimulationConfig.model_validate(config).prompt.user_template


def test_the_worker_bounds_a_prompt_before_any_request():
    limits = round_placeholder_limits()
    assert Template("ab{persona}{history}").longest(limits) == (
        2 + MAX_PERSONA_CHARS + limits["history"]
    )
    assert Template("{education}").longest(limits) == 200


def test_the_worker_refuses_a_metaprompt_that_could_render_too_much():
    request = pb.GeneratePersonasRequest(
        endpoints=[pb.LlmEndpoint(base_url="http://127.0.0.1:9", model="m", max_concurrency=1)],
        model="m",
        metaprompt="{education}" * 1000,
        fallback_template="{education}",
        attributes=[pb.AttributeColumn(name="education", categories=["y" * 200], codes=[0])],
        count=1,
    )
    with pytest.raises(InvalidLlmRequest, match="metaprompt: metaprompt can render to 200,000"):
        persona_job(request)


def test_the_worker_refuses_a_persona_over_the_limit():
    batch = pb.AgentBatch(
        population_id="1", agent_ids=[1], personas=["p" * (MAX_PERSONA_CHARS + 1)]
    )
    with pytest.raises(InvalidBatch, match="persona of 20,001 characters"):
        decode_batch(batch, 0)
