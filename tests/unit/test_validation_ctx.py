"""A 422 carries pydantic's bounds and choices (`ctx`) beside each message, so the dashboard can
word it ("Rounds must be between 1 and 1,000"): only plain values, never an object or a copy of
the message."""

from __future__ import annotations

import json
from typing import Literal

import pytest
from pydantic import BaseModel, Field, ValidationError, field_validator

from backend.api.errors import validation_issues
from backend.simulations.config import SimulationConfig


class Form(BaseModel):
    rounds: int = Field(ge=1, le=1000)
    mode: Literal["sequence", "parallel"] = "sequence"
    name: str = "x"

    @field_validator("name")
    @classmethod
    def _plain(cls, value: str) -> str:
        raise ValueError("not a plain name")


def _issues(data: dict) -> list[dict]:
    with pytest.raises(ValidationError) as caught:
        Form.model_validate(data)
    issues = validation_issues(caught.value.errors())
    json.dumps(issues, allow_nan=False)  # sendable as it is
    return issues


def test_bounds_and_choices_go_with_the_message():
    rounds, mode, name = _issues({"rounds": 5000, "mode": "random", "name": "a b"})
    assert rounds == {
        "loc": ["rounds"],
        "msg": "Input should be less than or equal to 1000",
        "type": "less_than_equal",
        "ctx": {"le": 1000},
    }
    assert mode["ctx"] == {"expected": "'sequence' or 'parallel'"}
    # A value_error's ctx holds the exception: not sent.
    assert name["type"] == "value_error" and "ctx" not in name


def test_a_bound_javascript_would_round_goes_as_text():
    with pytest.raises(ValidationError) as caught:
        SimulationConfig.model_validate({"population_id": 1, "rounds": 2, "seed": 2**63})
    (issue,) = validation_issues(caught.value.errors())
    assert issue["loc"] == ["seed"] and issue["ctx"] == {"le": "9223372036854775807"}


def test_a_check_of_the_managers_sends_no_copy_of_its_message():
    with pytest.raises(ValidationError) as caught:
        SimulationConfig.model_validate({"population_id": 1, "rounds": 2, "segment_by": ["a", "a"]})
    (issue,) = validation_issues(caught.value.errors())
    assert issue["loc"] == ["segment_by"] and issue["msg"] == "'a' appears twice"
    assert "ctx" not in issue
