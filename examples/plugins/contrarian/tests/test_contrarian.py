"""The example policy on its own: how it decides, and that the registry offers it with El Farol
(no manager, no workers; a run with it is in tests/integration/test_added_policies.py)."""

from __future__ import annotations

import ast
from importlib.metadata import EntryPoint
from pathlib import Path

import numpy as np
import populace_contrarian
from populace_contrarian import GO, STAY, Contrarian, ContrarianParams

from populace.plugin import Observation, Params
from populace.registry import GROUP, POLICY_GROUP, load_registry

EL_FAROL = EntryPoint("el_farol", "populace.builtins.el_farol:ElFarol", GROUP)


def _observation(go_ratio: list[float] | None, draws: list[float]) -> Observation:
    n = len(draws)
    return Observation(
        round=2,
        agent_ids=np.arange(n, dtype=np.int64),
        feedback={},
        group={} if go_ratio is None else {"go_ratio": np.asarray(go_ratio)},
        attributes={},
        uniforms=lambda stream: np.asarray(draws),
    )


def test_it_goes_after_a_crowded_round_and_stays_after_a_quiet_one():
    policy = ContrarianParams(first=0.5, crowded_above=0.6)
    seen = _observation([0.9, 0.2, 0.6, np.nan], [0.9, 0.9, 0.9, 0.1])
    decided = Contrarian().decide(Params(), policy, seen)
    # Crowded: go; quiet: stay; at the bound: not crowded, stay; no value yet: by chance (go).
    assert decided.tolist() == [GO, STAY, STAY, GO]


def test_before_any_round_it_goes_by_chance():
    decided = Contrarian().decide(
        Params(), ContrarianParams(first=0.3), _observation(None, [0.1, 0.5, 0.29, 0.3])
    )
    assert decided.tolist() == [GO, STAY, GO, STAY]


def test_the_registry_offers_it_with_el_farol_and_reports_its_version():
    point = EntryPoint("contrarian", "populace_contrarian:CONTRARIAN", POLICY_GROUP)
    registry = load_registry([EL_FAROL], [point])
    assert registry.broken == {}
    plugin = registry.get("el_farol")
    assert [p.name for p in plugin.policies][-1] == "contrarian"
    assert "contrarian" not in [p.name for p in type(plugin.simulation).policies]
    assert plugin.describe()["policies"][-1]["added_by"] == plugin.added["contrarian"][0]
    assert "el_farol:contrarian" in registry.versions()


def test_a_policy_for_a_plugin_not_installed_is_reported_not_loaded():
    point = EntryPoint("contrarian", "populace_contrarian:CONTRARIAN", POLICY_GROUP)
    registry = load_registry([], [point])
    assert registry.plugins == {}
    assert "not an installed plugin" in registry.broken["el_farol:contrarian"]


def test_it_imports_only_the_public_plugin_interface():
    tree = ast.parse(Path(populace_contrarian.__file__).read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)} | {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    assert {name for name in imported if name.startswith("populace")} == {"populace.plugin"}
