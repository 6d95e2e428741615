"""docs/configuration.md is what scripts/gen_config_reference.py makes from the config models:
a field added, renamed or re-limited in a model without `make docs` fails here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "configuration.md"


def _generator():
    spec = importlib.util.spec_from_file_location(
        "gen_config_reference", ROOT / "scripts" / "gen_config_reference.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_reference_is_fresh():
    expected = _generator().render()
    assert PAGE.exists(), "docs/configuration.md is missing: run make docs"
    assert PAGE.read_text() == expected, "docs/configuration.md is stale: run make docs"


def test_the_reference_has_every_field_of_every_config_model():
    from backend.populations.config import PopulationConfig
    from backend.simulations.config import LlmPolicyConfig, SimulationConfig
    from backend.sweeps.config import SweepConfig

    text = PAGE.read_text()
    for model in (PopulationConfig, SimulationConfig, LlmPolicyConfig, SweepConfig):
        assert f"### {model.__name__}\n" in text
        for name in model.model_fields:
            assert f"| `{name}` |" in text, f"{model.__name__}.{name} is not in the reference"


def test_rendering_twice_gives_the_same_page():
    generator = _generator()
    assert generator.render() == generator.render()
