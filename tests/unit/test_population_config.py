"""Population config validation: each bad input names its field (loc) and says what is wrong."""

from __future__ import annotations

import copy
import json

import pytest
from pydantic import ValidationError

from backend.documents import ConfigError
from backend.populations.config import (
    MAX_DEDICATED_AGENTS,
    PopulationConfig,
    check_submission,
    parse_config,
)

GOOD = {
    "name": "education-study",
    "size": 1000,
    "seed": 7,
    "distributions": [
        {
            "name": "education",
            "categories": [
                {"name": "primary school", "weight": 0.2},
                {"name": "bachelor", "weight": 0.5},
                {"name": "doctorate", "weight": 0.3},
            ],
        },
        {
            "name": "occupation",
            "given": "education",
            "conditional": {
                "primary school": [{"name": "farmer", "weight": 1.0}],
                "bachelor": [
                    {"name": "engineer", "weight": 0.6},
                    {"name": "teacher", "weight": 0.4},
                ],
                "doctorate": [{"name": "professor", "weight": 1.0}],
            },
        },
        {
            "name": "age",
            "bins": [
                {"name": "18-29", "min": 18, "max": 29, "weight": 0.4},
                {"name": "30-65", "min": 30, "max": 65, "weight": 0.6},
            ],
        },
    ],
    "persona": {
        "mode": "template",
        "template": "You are a {occupation}, {age_value}, whose education is {education}.",
    },
}


def config(**changes):
    data = copy.deepcopy(GOOD)
    data.update(changes)
    return data


def errors_of(data) -> list[dict]:
    with pytest.raises(ValidationError) as info:
        PopulationConfig.model_validate(data)
    return info.value.errors()


def only_error(data) -> tuple[tuple, str]:
    errors = errors_of(data)
    assert len(errors) == 1, errors
    return errors[0]["loc"], errors[0]["msg"]


def test_good_config_parses_from_yaml_and_json():
    yaml_text = """
name: education-study
size: 1000
seed: 7
distributions:
  - name: education
    categories:
      - {name: primary school, weight: 0.2}
      - {name: bachelor, weight: 0.5}
      - {name: doctorate, weight: 0.3}
  - name: occupation
    given: education
    conditional:
      primary school: [{name: farmer, weight: 1}]
      bachelor: [{name: engineer, weight: 0.6}, {name: teacher, weight: 0.4}]
      doctorate: [{name: professor, weight: 1}]
  - name: age
    bins:
      - {name: "18-29", min: 18, max: 29, weight: 0.4}
      - {name: "30-65", min: 30, max: 65, weight: 0.6}
persona:
  mode: template
  template: "You are a {occupation}, {age_value}, whose education is {education}."
"""
    from_yaml = parse_config(yaml_text)
    from_json = parse_config(json.dumps(GOOD))
    assert from_yaml == from_json
    assert from_yaml.distribution("occupation").category_names == [
        "farmer",
        "engineer",
        "teacher",
        "professor",
    ]
    assert from_yaml.distribution("age").kind == "bins"


def test_unknown_keys_are_rejected_at_every_level():
    assert only_error(config(colour="blue"))[0] == ("colour",)
    data = config()
    data["distributions"][0]["categories"][1]["wieght"] = 0.5
    loc, msg = only_error(data)
    assert loc == ("distributions", 0, "categories", 1, "wieght")
    assert msg == "Extra inputs are not permitted"
    data = config(persona={"template": "x", "temprature": 1})
    assert only_error(data)[0] == ("persona", "temprature")


def test_weights_must_sum_to_one():
    data = config()
    data["distributions"][0]["categories"][0]["weight"] = 0.1
    assert only_error(data) == (
        ("distributions", 0, "categories"),
        "weights sum to 0.9, not 1 (set normalize: true to scale them)",
    )


def test_normalize_scales_weights_but_not_all_zero():
    data = config()
    data["distributions"][0]["normalize"] = True
    for category, weight in zip(data["distributions"][0]["categories"], [2, 5, 3], strict=True):
        category["weight"] = weight
    PopulationConfig.model_validate(data)
    for category in data["distributions"][0]["categories"]:
        category["weight"] = 0
    assert only_error(data) == (
        ("distributions", 0, "categories"),
        "weights are all 0; at least one must be positive",
    )


def test_negative_weight():
    data = config()
    data["distributions"][0]["categories"][0]["weight"] = -0.2
    loc, msg = only_error(data)
    assert loc == ("distributions", 0, "categories", 0, "weight")
    assert "greater than or equal to 0" in msg


def test_empty_and_duplicate_categories():
    data = config()
    data["distributions"][0]["categories"] = []
    assert only_error(data)[0] == ("distributions", 0, "categories")
    assert only_error(data)[1] == "categories must not be empty"
    data = config()
    data["distributions"][0]["categories"][1]["name"] = "primary school"
    assert only_error(data) == (
        ("distributions", 0, "categories"),
        "'primary school' appears twice in categories",
    )


@pytest.mark.parametrize("size", [-5, 0, 10_000_001])
def test_size_out_of_range(size):
    loc, msg = only_error(config(size=size))
    assert loc == ("size",)
    assert "greater than or equal to 1" in msg or "less than or equal to 10000000" in msg


def test_negative_seed_and_empty_name():
    assert only_error(config(seed=-1))[0] == ("seed",)
    assert only_error(config(name=""))[0] == ("name",)


def test_distribution_names():
    data = config()
    data["distributions"][2]["name"] = "education"
    first = errors_of(data)[0]
    assert (first["loc"], first["msg"]) == (
        ("distributions", 2, "name"),
        "attribute name 'education' is already used",
    )
    data = config()
    data["distributions"][0]["name"] = "highest education"
    assert only_error(data)[0] == ("distributions", 0, "name")


def test_a_distribution_takes_exactly_one_form():
    data = config()
    data["distributions"][0]["bins"] = GOOD["distributions"][2]["bins"]
    loc, msg = only_error(data)
    assert loc == ("distributions", 0)
    assert msg.startswith("give exactly one of categories, given + conditional, or bins")
    data = config()
    data["distributions"][0] = {"name": "education"}
    assert only_error(data)[1].endswith("(found none)")
    data = config()
    del data["distributions"][1]["conditional"]
    assert only_error(data) == (
        ("distributions", 1, "conditional"),
        "conditional is required with given",
    )


def test_conditional_parent_must_be_an_earlier_distribution():
    data = config()
    data["distributions"][1]["given"] = "income"
    assert only_error(data) == (
        ("distributions", 1, "given"),
        "'income' is not an earlier distribution (earlier: education)",
    )
    # A later distribution is not a valid parent either.
    data = config()
    data["distributions"][1]["given"] = "age"
    data["distributions"][1]["conditional"] = {
        "18-29": [{"name": "student", "weight": 1}],
        "30-65": [{"name": "worker", "weight": 1}],
    }
    assert only_error(data)[0] == ("distributions", 1, "given")


def test_every_parent_category_needs_a_branch_and_no_others():
    data = config()
    del data["distributions"][1]["conditional"]["doctorate"]
    data["distributions"][1]["conditional"]["kindergarten"] = [{"name": "toddler", "weight": 1}]
    errors = {e["loc"]: e["msg"] for e in errors_of(data)}
    assert errors == {
        ("distributions", 1, "conditional", "kindergarten"): (
            "'kindergarten' is not a category of 'education'"
        ),
        ("distributions", 1, "conditional"): (
            "no branch for education = 'doctorate'; every parent category needs one"
        ),
    }


def test_conditional_branch_weights_are_checked_per_branch():
    data = config()
    data["distributions"][1]["conditional"]["bachelor"][0]["weight"] = 0.5
    assert only_error(data) == (
        ("distributions", 1, "conditional", "bachelor"),
        "weights sum to 0.9, not 1 (set normalize: true to scale them)",
    )
    data["distributions"][1]["normalize"] = True
    PopulationConfig.model_validate(data)


def test_bins():
    data = config()
    data["distributions"][2]["bins"][0].update(min=40, max=30)
    assert only_error(data) == (
        ("distributions", 2, "bins", 0, "min"),
        "min 40 is greater than max 30",
    )
    data = config()
    data["distributions"][2]["bins"][0]["weight"] = 0.5
    assert only_error(data)[0] == ("distributions", 2, "bins")


def test_placeholders_must_name_attributes():
    data = config(persona={"template": "You are {occupation} from {country} aged {age_value}."})
    loc, msg = only_error(data)
    assert loc == ("persona", "template")
    assert msg == ("unknown placeholder {country}; known: age, age_value, education, occupation")
    # `_value` exists only for binned attributes.
    data = config(persona={"template": "You studied {education_value}."})
    assert only_error(data)[0] == ("persona", "template")
    data = config(persona={"template": "You are {}."})
    loc, msg = only_error(data)
    assert loc == ("persona", "template")
    assert "positional placeholder" in msg
    data = config(persona={"template": "You are {education."})
    assert only_error(data)[0] == ("persona", "template")


def test_llm_mode_needs_metaprompt_endpoint_model():
    data = config(persona={"mode": "llm", "template": "You are a {education} graduate."})
    errors = {e["loc"]: e["msg"] for e in errors_of(data)}
    assert errors == {
        ("persona", "metaprompt"): "required when mode is llm",
        ("persona", "endpoint"): "required when mode is llm",
        ("persona", "model"): "required when mode is llm",
    }
    llm = {
        "mode": "llm",
        "template": "You are a {education} graduate.",
        "metaprompt": "Write a persona for a {occupation} aged {age_value} and {salary}.",
        "endpoint": "http://127.0.0.1:8000/v1/",
        "model": "gemma",
    }
    loc, msg = only_error(config(persona=llm))
    assert loc == ("persona", "metaprompt")
    assert msg.startswith("unknown placeholder {salary};")
    llm["metaprompt"] = "Write a persona for a {occupation} aged {age_value}."
    parsed = PopulationConfig.model_validate(config(persona=llm))
    assert parsed.persona.endpoint == "http://127.0.0.1:8000"
    assert parsed.persona.max_concurrency == 16
    assert only_error(config(persona={**llm, "endpoint": "ftp://x"}))[0] == ("persona", "endpoint")
    assert only_error(config(persona={**llm, "max_concurrency": 0}))[0] == (
        "persona",
        "max_concurrency",
    )


def test_no_distributions_is_allowed():
    parsed = PopulationConfig.model_validate(
        config(distributions=[], persona={"template": "You are a citizen."})
    )
    assert parsed.distributions == []


def test_syntax_errors_name_the_document_and_line():
    with pytest.raises(ConfigError) as info:
        parse_config("name: x\nsize: [1, 2\npersona: {}\n")
    assert info.value.field == "(document)"
    assert "line 3" in info.value.message
    with pytest.raises(ConfigError) as info:
        parse_config('{"name": "x",\n "size": }')
    assert info.value.field == "(document)"
    assert info.value.message.startswith("line 2, column")
    with pytest.raises(ConfigError) as info:
        parse_config("- just\n- a list\n")
    assert info.value.message == "expected a mapping at the top level, got list"
    assert info.value.errors()[0]["loc"] == ("(document)",)


def test_parse_config_raises_validation_errors_with_loc():
    with pytest.raises(ValidationError) as info:
        parse_config("name: x\nsize: -3\npersona: {template: hi}\n")
    assert [e["loc"] for e in info.value.errors()] == [("size",)]


def test_a_process_per_agent_is_capped_naming_the_field():
    placement = {"dedicated_process": True}
    small = PopulationConfig.model_validate(config(size=12, placement=placement))
    assert (
        small.placement.dedicated_process
        and not PopulationConfig.model_validate(GOOD).placement.dedicated_process
    )
    check_submission(small, max_size=10_000_000)
    big = PopulationConfig.model_validate(
        config(size=MAX_DEDICATED_AGENTS + 1, placement=placement)
    )
    with pytest.raises(ValidationError) as refused:
        check_submission(big, max_size=10_000_000)
    (error,) = refused.value.errors()
    assert error["loc"] == ("placement", "dedicated_process")
    assert f"size {MAX_DEDICATED_AGENTS + 1} is more than {MAX_DEDICATED_AGENTS}" in error["msg"]
    assert only_error(config(placement={"dedicated_process": "often"}))[0] == (
        "placement",
        "dedicated_process",
    )
