"""The public plugin interface (populace.plugin) and the registry that finds plugins by entry
point (populace.registry): declarations are checked, a broken plugin is reported without taking
the others down, and the built-in guessing game is registered like anyone's."""

from __future__ import annotations

import math
from importlib.metadata import EntryPoint

import numpy as np
import pytest
from pydantic import ValidationError

from populace.builtins.guess import GuessingGame, GuessParams
from populace.plugin import (
    BooleanAction,
    ChoiceAction,
    IntegerAction,
    Metric,
    NumberAction,
    Params,
    PolicyEntry,
    PolicySupport,
    RulePolicy,
    Simulation,
    llm_policy,
)
from populace.registry import GROUP, POLICY_GROUP, installed, load_registry

HERE = __name__


class Coin(Simulation):
    title = "Coin"
    metrics = (Metric("heads_share", "Share of heads"),)
    policies = (PolicySupport("fair", "Fair coin"),)
    default_policy = "fair"

    def action(self, params: Params) -> ChoiceAction:
        return ChoiceAction(("heads", "tails"))


class Untitled(Coin):
    title = ""


class TwiceTheMetric(Coin):
    metrics = (Metric("m", "M"), Metric("m", "M again"))


class UnknownDefault(Coin):
    default_policy = "rigged"


class NoAction(Coin):
    def action(self, params: Params):
        raise RuntimeError("the action depends on nothing I know")


class NotASimulation:
    title = "Not one"


def point(name: str, target: str) -> EntryPoint:
    return EntryPoint(name, target, GROUP)


class AlwaysHeads(RulePolicy):
    def decide(self, params, policy, observation):
        return np.zeros(len(observation.agent_ids))


ALWAYS_HEADS = PolicyEntry("coin", PolicySupport("always_heads", "Always heads", rule=AlwaysHeads))
FAIR_AGAIN = PolicyEntry("coin", PolicySupport("fair", "Fair again", rule=AlwaysHeads))
LLM_ADDED = PolicyEntry("coin", llm_policy())
NOT_AN_ENTRY = PolicySupport("loose", "Loose", rule=AlwaysHeads)


def policy_point(name: str, target: str) -> EntryPoint:
    return EntryPoint(name, target, POLICY_GROUP)


def test_a_plugin_loads_and_describes_itself():
    registry = load_registry([point("coin", f"{HERE}:Coin")])
    assert registry.broken == {}
    described = registry.get("coin").describe()
    assert described["action"] == {"kind": "choice", "options": ["heads", "tails"]}
    assert [m["name"] for m in described["metrics"]] == ["heads_share"]
    assert described["policies"][0]["name"] == "fair" and described["default_policy"] == "fair"
    assert described["params_schema"]["type"] == "object"


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("no_such_module_anywhere:Game", "ModuleNotFoundError"),
        (f"{HERE}:NotASimulation", "is not a populace.plugin.Simulation class"),
        (f"{HERE}:Untitled", "declares no title"),
        (f"{HERE}:TwiceTheMetric", "a metric name twice"),
        (f"{HERE}:UnknownDefault", "default policy 'rigged'"),
        (f"{HERE}:NoAction", "the action depends on nothing I know"),
    ],
)
def test_a_broken_plugin_is_reported_and_the_others_still_load(target, reason):
    registry = load_registry([point("broken", target), point("coin", f"{HERE}:Coin")])
    assert list(registry.plugins) == ["coin"]
    assert reason in registry.broken["broken"]
    with pytest.raises(KeyError, match="installed but cannot be loaded"):
        registry.get("broken")


def test_a_name_two_packages_claim_and_a_bad_name_are_refused():
    registry = load_registry(
        [
            point("coin", f"{HERE}:Coin"),
            point("coin", f"{HERE}:Coin"),
            point("Coin!", f"{HERE}:Coin"),
        ]
    )
    assert registry.plugins == {}
    assert "more than one" in registry.broken["coin"]
    assert "lower case" in registry.broken["Coin!"]


def test_an_unknown_name_lists_the_known_ones():
    registry = load_registry([point("coin", f"{HERE}:Coin")])
    with pytest.raises(KeyError, match="no plugin named 'dice'; installed: coin"):
        registry.get("dice")


def test_the_guessing_game_is_installed_through_its_entry_point():
    plugin = installed().get("guess")
    assert isinstance(plugin.simulation, GuessingGame)
    assert plugin.distribution == "populace" and plugin.version
    described = plugin.describe()
    assert described["action"] == {"kind": "number", "low": 0.0, "high": 100.0}
    assert set(described["params_schema"]["properties"]) == {"rule", "feedback"}
    assert {p["name"] for p in described["policies"]} == {"level_k", "synthetic", "llm"}
    assert [p["name"] for p in described["policies"] if p["uses_llm"]] == ["llm"]


def test_the_guessing_games_params_name_the_field_they_refuse():
    assert GuessParams().rule.resolved == (2 / 3, 0.0)
    with pytest.raises(ValidationError) as caught:
        GuessParams.model_validate({"rule": {"preset": "2/3", "ratio": 0.5, "min": 5, "max": 5}})
    locs = {tuple(e["loc"]) for e in caught.value.errors()}
    assert locs == {("rule", "ratio"), ("rule", "max")}
    with pytest.raises(ValidationError, match="extra"):
        GuessParams.model_validate({"rules": {}})
    game = GuessingGame()
    action = game.action(GuessParams.model_validate({"rule": {"ratio": 1, "min": -5, "max": 5}}))
    assert (action.low, action.high) == (-5, 5)


def test_actions_say_which_values_are_valid_over_a_whole_column():
    values = np.array([-1.0, 0.0, 0.5, 1.0, 2.0, 3.0, math.nan])
    assert NumberAction(0, 2).valid(values).tolist() == [0, 1, 1, 1, 1, 0, 0]
    assert IntegerAction(0, 2).valid(values).tolist() == [0, 1, 0, 1, 1, 0, 0]
    assert ChoiceAction(("a", "b", "c")).valid(values).tolist() == [0, 1, 0, 1, 1, 0, 0]
    assert BooleanAction().valid(values).tolist() == [0, 1, 0, 1, 0, 0, 0]
    assert ChoiceAction(("go", "stay")).option(1.0) == "stay"


@pytest.mark.parametrize(
    "make",
    [
        lambda: NumberAction(1, 1),
        lambda: NumberAction(0, math.inf),
        lambda: IntegerAction(3, 2),
        lambda: ChoiceAction(("only",)),
        lambda: ChoiceAction(("go", "GO")),
        lambda: BooleanAction("yes", "yes"),
        lambda: Metric("Mean value", "Mean"),
    ],
)
def test_declarations_that_cannot_hold_are_refused(make):
    with pytest.raises(ValueError):
        make()


def test_a_policy_another_package_adds_joins_the_plugins_own():
    registry = load_registry(
        [point("coin", f"{HERE}:Coin")], [policy_point("always_heads", f"{HERE}:ALWAYS_HEADS")]
    )
    assert registry.broken == {}
    coin = registry.get("coin")
    assert [p.name for p in coin.policies] == ["fair", "always_heads"]
    assert [p.name for p in Coin.policies] == ["fair"]  # the plugin's class is left alone
    described = coin.describe()["policies"]
    assert [p["added_by"] for p in described] == [None, ""]  # no distribution behind a test point
    assert registry.versions() == {"coin": "0", "coin:always_heads": "0"}


@pytest.mark.parametrize(
    ("name", "target", "key", "reason"),
    [
        ("fair", f"{HERE}:FAIR_AGAIN", "coin:fair", "already has a policy named 'fair'"),
        ("llm", f"{HERE}:LLM_ADDED", "policy:llm", "is a populace.plugin.RulePolicy"),
        ("loose", f"{HERE}:NOT_AN_ENTRY", "policy:loose", "is not a populace.plugin.PolicyEntry"),
        ("other", f"{HERE}:ALWAYS_HEADS", "policy:other", "must be its policy's name"),
        ("gone", "no_such_module_anywhere:X", "policy:gone", "ModuleNotFoundError"),
    ],
)
def test_an_added_policy_that_cannot_hold_is_reported_and_the_plugin_plays_on(
    name, target, key, reason
):
    registry = load_registry([point("coin", f"{HERE}:Coin")], [policy_point(name, target)])
    assert reason in registry.broken[key]
    assert [p.name for p in registry.get("coin").policies] == ["fair"]


def test_a_policy_name_two_packages_add_is_trusted_to_neither():
    twice = [policy_point("always_heads", f"{HERE}:ALWAYS_HEADS")] * 2
    registry = load_registry([point("coin", f"{HERE}:Coin")], twice)
    assert "more than one" in registry.broken["coin:always_heads"]
    assert [p.name for p in registry.get("coin").policies] == ["fair"]
