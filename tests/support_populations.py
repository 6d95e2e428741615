"""Populations for the tests: the configs under tests/configs/ and the one way a test deploys a
population through the REST API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.support import wait_for

CONFIGS = Path(__file__).resolve().parent / "configs"
YAML = {"Content-Type": "application/yaml"}


def population_text(file: str) -> str:
    """The population config tests/configs/`file`.yaml as written."""
    return (CONFIGS / f"{file}.yaml").read_text()


def population_config(file: str, /, **fields: Any) -> dict:
    """The population config tests/configs/`file`.yaml, its top-level `fields` replaced."""
    return {**yaml.safe_load(population_text(file)), **fields}


def population_yaml(file: str, /, **fields: Any) -> str:
    """population_config as a YAML document (the file as written when nothing is replaced)."""
    if not fields:
        return population_text(file)
    return yaml.safe_dump(population_config(file, **fields), sort_keys=False, allow_unicode=True)


def deploy_population(
    api, config: str | dict, *, wait_s: float = 60, may_fail: bool = False
) -> dict:
    """POST `config` (a YAML document, or a dict sent as JSON) to /api/populations and wait until
    the population is deployed; return it. With may_fail, a population that failed to deploy is
    returned too, for the test to look at."""
    if isinstance(config, str):
        resp = api.post("/api/populations", content=config, headers=YAML)
    else:
        resp = api.post("/api/populations", json=config)
    assert resp.status_code == 202, resp.text
    pid = resp.json()["id"]
    population = wait_for(
        lambda: (
            (p := api.get(f"/api/populations/{pid}").json())["status"] in ("deployed", "failed")
            and p
        ),
        wait_s,
        what=f"population {pid} deployed",
    )
    if not may_fail:
        assert population["status"] == "deployed", population
    return population
