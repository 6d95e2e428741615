"""The sweep file: grid expansion in a stable order, and errors that name the field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from backend.sweeps.config import MAX_RUNS, SweepConfig, params_key, parse_sweep

RULE_BY_SEED = """
name: rule-by-seed
mode: sequence
populations: [3]
base: {rounds: 5, policy: {kind: synthetic}}
grid:
  rule: [{ratio: 0.6667, offset: 0}, {ratio: 0.5, offset: 5}]
  seed: [1, 2]
"""


def sweep(**overrides) -> dict:
    return {
        "name": "s",
        "populations": [3],
        "base": {"rounds": 5, "policy": {"kind": "level_k"}},
        "grid": {"policy.default_depth": [0, 1]},
        **overrides,
    }


def errors(document: dict) -> dict[tuple, str]:
    with pytest.raises(ValidationError) as caught:
        SweepConfig.model_validate(document)
    return {tuple(e["loc"]): e["msg"] for e in caught.value.errors()}


def test_the_runs_are_the_grid_product_first_key_slowest():
    config = parse_sweep(RULE_BY_SEED)
    assert config.runs == 4 and config.mode == "sequence"
    assert config.points() == [
        {"rule": {"ratio": 0.6667, "offset": 0}, "seed": 1},
        {"rule": {"ratio": 0.6667, "offset": 0}, "seed": 2},
        {"rule": {"ratio": 0.5, "offset": 5}, "seed": 1},
        {"rule": {"ratio": 0.5, "offset": 5}, "seed": 2},
    ]
    third = config.simulation_config(2, population_id=9)
    assert third.population_id == 9 and third.seed == 1 and third.rounds == 5
    assert third.rule.resolved == (0.5, 5.0)
    assert third.name == 'rule-by-seed #3: rule={"ratio":0.5,"offset":5}, seed=1'


def test_dotted_keys_reach_into_nested_fields_and_leave_the_base_alone():
    config = SweepConfig.model_validate(
        sweep(grid={"policy.default_depth": [0, 3], "prompt.user": ["basic", "cot"]})
    )
    configs = [config.simulation_config(i, 3) for i in range(config.runs)]
    assert [(c.policy.default_depth, c.prompt.user) for c in configs] == [
        (0, "basic"),
        (0, "cot"),
        (3, "basic"),
        (3, "cot"),
    ]
    assert config.base == {"rounds": 5, "policy": {"kind": "level_k"}}


def test_params_identify_a_point_whatever_the_key_order():
    assert params_key({"a": 1, "b": {"y": 2, "x": 1}}) == params_key(
        {"b": {"x": 1, "y": 2}, "a": 1}
    )
    assert params_key({"a": 1}) != params_key({"a": 2})


def test_a_value_out_of_range_is_named_at_its_grid_entry():
    found = errors(sweep(grid={"policy.default_depth": [1, 200], "rounds": [3, 2000]}))
    assert "less than or equal to 100" in found[("grid", "policy.default_depth", 1)]
    assert "point 3" in found[("grid", "policy.default_depth", 1)]
    assert "less than or equal to 1000" in found[("grid", "rounds", 1)]


def test_a_problem_of_the_base_is_named_once_at_the_base():
    found = errors(sweep(base={"rounds": 0, "policy": {"kind": "level_k"}}))
    assert list(found) == [("base", "rounds")]


def test_unknown_keys_anywhere_are_refused():
    assert ("colour",) in errors(sweep(colour="red"))
    found = errors(sweep(grid={"policy.depth": [1, 2]}))
    assert ("grid", "policy.depth", 0) in found and "Extra inputs" in found[
        ("grid", "policy.depth", 0)
    ]


@pytest.mark.parametrize(
    ("changes", "loc", "words"),
    [
        ({"grid": {}}, ("grid",), "at least 1"),
        ({"grid": {"seed": []}}, ("grid", "seed"), "at least one value"),
        ({"grid": {"seed": [1, 1]}}, ("grid", "seed", 1), "appears twice"),
        ({"grid": {"population_id": [1, 2]}}, ("grid", "population_id"), "populations"),
        ({"base": {"rounds": 2, "population_id": 3}}, ("base", "population_id"), "populations"),
        ({"grid": {"rule..ratio": [1]}}, ("grid", "rule..ratio"), "dotted path"),
        (
            {"grid": {"policy": [{"kind": "synthetic"}], "policy.latency_s": [1]}},
            ("grid", "policy.latency_s"),
            "overlaps",
        ),
        ({"populations": []}, ("populations",), "at least 1"),
        ({"populations": [3, 3]}, ("populations",), "twice"),
        ({"mode": "random"}, ("mode",), "sequence"),
        (
            {"base": {"rounds": 2, "policy": "synthetic"}, "grid": {"policy.latency_s": [1]}},
            ("grid", "policy.latency_s"),
            "not a mapping",
        ),
    ],
)
def test_errors_name_the_field(changes, loc, words):
    found = errors(sweep(**changes))
    assert loc in found, found
    assert words in found[loc]


def test_too_many_runs_are_refused_naming_the_grid():
    grid = {"seed": list(range(17)), "rounds": list(range(1, 17))}
    found = errors(sweep(grid=grid))
    assert f"at most {MAX_RUNS}" in found[("grid",)] and "272" in found[("grid",)]
    assert SweepConfig.model_validate(sweep(grid={"seed": list(range(MAX_RUNS))})).runs == MAX_RUNS
