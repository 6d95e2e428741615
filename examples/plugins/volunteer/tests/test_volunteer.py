"""The example plugin on its own: its resolve, its policies and its declaration, with nothing
but populace's plugin interface (no manager, no workers)."""

from __future__ import annotations

import ast
from importlib.metadata import EntryPoint
from pathlib import Path

import numpy as np
import populace_volunteer
import pytest
from populace_volunteer import (
    Equilibrium,
    FixedChance,
    FixedChanceParams,
    VolunteerParams,
    VolunteersDilemma,
    equilibrium_chance,
)
from pydantic import ValidationError

from populace.plugin import INVALID, VALID, AgentView, Observation, RoundActions
from populace.registry import load_registry

PARAMS = VolunteerParams(benefit=10, cost=2, group_size=3)


def _actions(values: list[float], status: list[int] | None = None) -> RoundActions:
    status = status or [VALID] * len(values)
    return RoundActions(
        round=1,
        agent_ids=(np.int64(1) << 32) | np.arange(len(values), dtype=np.int64),
        values=np.asarray(values, dtype=np.float64),
        status=np.asarray(status, dtype=np.uint8),
    )


def _observation(agents: int, seed: int = 0) -> Observation:
    streams = np.random.default_rng(seed)
    return Observation(
        round=1,
        agent_ids=np.arange(agents, dtype=np.int64),
        feedback={},
        group={},
        attributes={},
        uniforms=lambda stream: streams.random(agents),
    )


def test_one_volunteer_helps_its_whole_group():
    # Groups of 3: the first has one volunteer, the second none, the third (one agent) one.
    resolved = VolunteersDilemma().resolve(PARAMS, _actions([1, 0, 0, 0, 0, 0, 1]))
    assert resolved.metrics == {
        "n_valid": 7,
        "n_invalid": 0,
        "volunteer_share": 2 / 7,
        "success_share": 2 / 3,
        "mean_payoff": (8 + 10 + 10 + 0 + 0 + 0 + 8) / 7,
    }
    assert resolved.groups["volunteers"].tolist() == [1.0, 0.0, 1.0]


def test_an_invalid_answer_neither_volunteers_nor_counts():
    resolved = VolunteersDilemma().resolve(PARAMS, _actions([np.nan, 0, 0], [INVALID, 0, 0]))
    assert resolved.metrics["n_invalid"] == 1 and resolved.metrics["n_valid"] == 2
    assert resolved.metrics["success_share"] == 0.0 and resolved.metrics["mean_payoff"] == 0.0


def test_the_equilibrium_policy_volunteers_at_the_equilibrium_chance():
    chance = equilibrium_chance(PARAMS)
    assert chance == pytest.approx(1 - 0.2**0.5)
    decided = Equilibrium().decide(PARAMS, None, _observation(100_000))
    assert set(np.unique(decided)) <= {0.0, 1.0}
    assert decided.mean() == pytest.approx(chance, abs=0.01)
    fixed = FixedChance().decide(PARAMS, FixedChanceParams(chance=0.0), _observation(10))
    assert not fixed.any()


def test_params_are_checked_with_the_field_named():
    with pytest.raises(ValidationError) as caught:
        VolunteerParams(benefit=1, cost=2)
    assert caught.value.errors()[0]["loc"] == ("cost",)
    schema = VolunteerParams.model_json_schema()["properties"]
    assert {name: field["type"] for name, field in schema.items()} == {
        "benefit": "number",
        "cost": "number",
        "group_size": "integer",
    }
    assert all("title" in field for field in schema.values())


def test_it_runs_under_whatever_name_it_is_installed_as():
    point = EntryPoint("helping", "populace_volunteer:VolunteersDilemma", "populace.simulations")
    registry = load_registry([point])
    assert registry.broken == {}
    plugin = registry.get("helping")
    assert isinstance(plugin.simulation, VolunteersDilemma)


def test_it_imports_only_the_public_plugin_interface():
    tree = ast.parse(Path(populace_volunteer.__file__).read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)} | {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    assert {name for name in imported if name.startswith("populace")} == {"populace.plugin"}


def test_llm_agents_are_asked_about_their_groups_last_round():
    view = AgentView(
        round=2, persona="You are a nurse.", attributes={}, feedback={}, group={"volunteers": 1}
    )
    prompt = VolunteersDilemma().render(PARAMS, view)
    assert "group of 3" in prompt.system and "10 points" in prompt.system
    assert "Last round 1 of your group volunteered." in prompt.user
    assert prompt.user.index("This is round 2") < prompt.user.index("You are a nurse.")
    first = VolunteersDilemma().render(PARAMS, AgentView(1, "", {}, {}, {}))
    assert "Last round" not in first.user and first.user.endswith("Answer:")
