"""Every file in examples/ is accepted by a real manager, sent the way the CLI sends it.

The CLI (`populace population create`, `populace simulate`, `populace sweep run`) posts a file's
bytes as application/yaml; the manager parses and validates them. Here each example goes through
the same route to a real manager with a real worker: population configs through
POST /api/populations/validate (the template one is also deployed with the CLI, as the
README says), simulation configs through POST /api/simulations/estimate (those without an LLM
also run to completion with `populace simulate`), the sweep through POST /api/sweeps until it
completes. A file in examples/ that no test knows fails, so nothing ships unchecked.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from backend.populations.config import PopulationConfig
from backend.populations.config import parse_config as parse_population
from backend.simulations.config import LlmPolicyConfig, check_against_population
from backend.simulations.config import parse_config as parse_simulation
from backend.sweeps.config import parse_sweep
from tests.support import Manager, populace_cmd, running_cluster, wait_for

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
YAML = {"Content-Type": "application/yaml"}
# The population the simulation and sweep examples name (population_id: 1 on a fresh manager).
DEPLOYED = EXAMPLES / "populations" / "template-personas.yaml"
# The network simulation examples' population, deployed second (population_id: 2).
NETWORK = EXAMPLES / "populations" / "small-world.yaml"
KINDS = ("populations", "simulations", "sweeps")


def _files(kind: str) -> list[Path]:
    return sorted((EXAMPLES / kind).glob("*.yaml"))


def _ids(paths: list[Path]) -> list[str]:
    return [p.name for p in paths]


def _left_behind(path: Path) -> bool:
    """What installing or testing an example plugin leaves in its folder (git ignores it)."""
    return any(p in {"__pycache__", ".pytest_cache"} or p.endswith(".egg-info") for p in path.parts)


def test_examples_holds_only_files_these_tests_check():
    known = {EXAMPLES / "README.md"} | {p for kind in KINDS for p in _files(kind)}
    # The example plugins' own files: their tests run with the suite (pytest examples/plugins).
    known |= {p for p in (EXAMPLES / "plugins").rglob("*") if p.is_file()}
    unknown = sorted(
        str(p.relative_to(ROOT))
        for p in EXAMPLES.rglob("*")
        if p.is_file() and p not in known and not _left_behind(p)
    )
    assert not unknown, (
        f"no test validates {unknown}: add them to tests/integration/test_examples.py"
    )
    for kind in KINDS:
        assert _files(kind), f"examples/{kind}/ has no example"


def test_the_readme_names_every_example_and_its_command():
    readme = (EXAMPLES / "README.md").read_text()
    commands = {
        "populations": "populace population create",
        "simulations": "populace simulate",
        "sweeps": "populace sweep run",
    }
    for kind in KINDS:
        for path in _files(kind):
            assert f"{commands[kind]} examples/{kind}/{path.name}" in readme, path.name
    for project in sorted((EXAMPLES / "plugins").glob("*/pyproject.toml")):
        assert f"pip install -e examples/plugins/{project.parent.name}" in readme, project


@pytest.fixture(scope="module")
def manager(tmp_path_factory) -> Manager:
    tmp = tmp_path_factory.mktemp("examples")
    with running_cluster(tmp, f"sqlite+aiosqlite:///{tmp}/populace.db", procs=1) as running:
        yield running


def _cli(manager: Manager, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        populace_cmd(*args, "--manager", manager.url),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, "POPULACE_API_TOKEN": manager.api_token},
    )


@pytest.fixture(scope="module")
def population(manager: Manager) -> dict:
    """The template example deployed with the CLI, as examples/README.md says to."""
    done = _cli(manager, "population", "create", str(DEPLOYED.relative_to(ROOT)))
    assert done.returncode == 0, done.stdout + done.stderr
    with manager.api() as api:
        population = api.get("/api/populations/1").json()
    assert population["status"] == "deployed", population
    assert population["name"] == parse_population(DEPLOYED.read_text()).name
    return population


@pytest.fixture(scope="module")
def network_population(manager: Manager, population: dict) -> dict:
    """The small-world example deployed with the CLI after the template one (so its id is 2)."""
    done = _cli(manager, "population", "create", str(NETWORK.relative_to(ROOT)))
    assert done.returncode == 0, done.stdout + done.stderr
    with manager.api() as api:
        deployed = api.get("/api/populations/2").json()
    assert deployed["status"] == "deployed", deployed
    assert deployed["graph"]["kind"] == "watts_strogatz"
    return deployed


@pytest.mark.parametrize("path", _files("populations"), ids=_ids(_files("populations")))
def test_population_examples_validate(manager: Manager, path: Path):
    text = path.read_text()
    config = parse_population(text)
    with manager.api() as api:
        resp = api.post("/api/populations/validate", content=path.read_bytes(), headers=YAML)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["config"] == config.model_dump(mode="json")
    assert body["attributes"] == [p for d in config.distributions for p in d.placeholders]


def test_validate_refuses_a_broken_population_naming_the_field(manager: Manager):
    broken = DEPLOYED.read_text().replace("size: 10000", "size: 0")
    assert broken != DEPLOYED.read_text()
    with manager.api() as api:
        before = api.get("/api/populations").json()["items"]
        resp = api.post("/api/populations/validate", content=broken, headers=YAML)
        assert resp.status_code == 422, resp.text
        assert [e["loc"] for e in resp.json()["detail"]] == [["body", "size"]]
        fine = api.post("/api/populations/validate", content=DEPLOYED.read_bytes(), headers=YAML)
        assert fine.status_code == 200, fine.text
        # Validating deploys nothing.
        assert api.get("/api/populations").json()["items"] == before


def test_validate_needs_the_operator_token(manager: Manager):
    with manager.api() as api:
        anonymous = api.post(
            "/api/populations/validate",
            content=DEPLOYED.read_bytes(),
            headers={**YAML, "Authorization": ""},
        )
        viewer = api.post(
            "/api/populations/validate",
            content=DEPLOYED.read_bytes(),
            headers={**YAML, "Authorization": f"Bearer {manager.viewer_token}"},
        )
    assert anonymous.status_code == 401
    assert viewer.status_code == 403


@pytest.mark.parametrize("path", _files("simulations"), ids=_ids(_files("simulations")))
def test_simulation_examples_validate(manager: Manager, request, path: Path):
    config = parse_simulation(path.read_text())
    population = request.getfixturevalue("population")
    if config.population_id != population["id"]:  # a network simulation's population
        population = request.getfixturevalue("network_population")
    assert config.population_id == population["id"]
    with manager.api() as api:
        resp = api.post("/api/simulations/estimate", content=path.read_bytes(), headers=YAML)
        assert resp.status_code == 200, resp.text
        estimate = resp.json()
        detail = api.get(f"/api/populations/{population['id']}").json()
    assert estimate["agents"] == population["size"]
    assert estimate["rounds"] == config.rounds
    # The attributes of the population as the manager stores it.
    deployed = PopulationConfig.model_validate(detail["config"])
    attributes = {p for d in deployed.distributions for p in d.placeholders}
    assert attributes
    if isinstance(config.policy, LlmPolicyConfig):
        # Launching needs the LLM servers; the attribute check a launch makes is made here.
        check_against_population(config, attributes)
        assert estimate["requests"] > 0
        assert estimate["prompt_tokens_per_request"] > 0
        priced = all(e.price is not None for e in config.policy.endpoints)
        assert (estimate["cost_usd"] is not None) == priced
    else:
        done = _cli(manager, "simulate", str(path.relative_to(ROOT)))
        assert done.returncode == 0, done.stdout + done.stderr
        assert "completed" in done.stdout, done.stdout


@pytest.mark.parametrize("path", _files("sweeps"), ids=_ids(_files("sweeps")))
def test_sweep_examples_run(manager: Manager, population: dict, path: Path):
    sweep = parse_sweep(path.read_text())
    assert population["id"] in sweep.populations
    with manager.api() as api:
        resp = api.post("/api/sweeps", content=path.read_bytes(), headers=YAML)
        assert resp.status_code == 202, resp.text
        sweep_id = resp.json()["id"]
        final = wait_for(
            lambda: (
                (s := api.get(f"/api/sweeps/{sweep_id}").json())["status"]
                in {"completed", "failed", "cancelled"}
                and s
            ),
            600,
            what=f"sweep {sweep_id} to end",
        )
    assert final["status"] == "completed", final
    assert final["launched"] == final["finished"] == sweep.runs
