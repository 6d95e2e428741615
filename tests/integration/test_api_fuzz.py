"""Schemathesis against the manager's own OpenAPI: every operation, the two config bodies
included, must answer without a 500 and exactly as its schema says (status codes and bodies).

The run is deterministic (the same cases every time) with a fixed example budget, so it stays
within a few minutes. A failure prints schemathesis's report with a curl line per case; fix the
server, not this test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import IN_CI

pytestmark = pytest.mark.postgres

CHECKS = "not_a_server_error,status_code_conformance,response_schema_conformance"
# The fuzzing phase's budget per operation (the coverage phase's ~11,000 boundary cases come on
# top, whatever the budget): 100 took ~230 s on a 2-vCPU CI machine, near the 240 s timeout.
MAX_EXAMPLES = 50
WORKER_PLANE = "worker plane"  # the tag of the routes workers call, with the join token


def _st() -> str:
    found = shutil.which("st", path=str(Path(sys.executable).parent)) or shutil.which("st")
    if found is None:
        message = "schemathesis is not installed (it is in the dev extra: pip install -e .[dev])"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return found


@pytest.fixture
def fuzzed(manager_factory, postgres_url, tmp_path):
    """A manager on a fresh Postgres database, and its schema saved to a file (fetching it
    needs the API token, and the worker plane is tested with the join token)."""
    manager = manager_factory(database_url=postgres_url).start()
    with manager.api() as api:
        resp = api.get("/api/openapi.json")
        resp.raise_for_status()
    schema = tmp_path / "openapi.json"
    schema.write_text(resp.text)
    return manager, resp.json(), schema


def _schemathesis(schema: Path, url: str, token: str, *selection: str) -> str:
    # The token goes through the environment, not the command line (process lists show that).
    config = schema.parent / "schemathesis.toml"
    config.write_text('[headers]\nAuthorization = "Bearer ${POPULACE_FUZZ_TOKEN}"\n')
    command = [
        _st(),
        "--config-file",
        str(config),
        "run",
        str(schema),
        "--url",
        url,
        "--checks",
        CHECKS,
        "--max-examples",
        str(MAX_EXAMPLES),
        "--generation-deterministic",
        # One at a time: the manager has the same 2 cores, and parallel workers can trip a
        # CPython 3.11 bug in schemathesis's generator (ast.parse from threads).
        "--workers",
        "1",
        "--request-timeout",
        "30",
        "--no-color",
        *selection,
    ]
    done = subprocess.run(
        command,
        cwd=schema.parent,
        env={**os.environ, "POPULACE_FUZZ_TOKEN": token},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    report = done.stdout + done.stderr
    assert done.returncode == 0, f"schemathesis found problems:\n{report[-12000:]}"
    # Every operation got past the token check (otherwise it only tested 401s).
    assert "Authentication failed" not in report, report[-3000:]
    return report


def _operations(schema: dict, worker_plane: bool) -> int:
    return sum(
        1
        for methods in schema["paths"].values()
        for operation in methods.values()
        if (WORKER_PLANE in operation.get("tags", ())) == worker_plane
    )


def test_config_bodies_are_in_the_schema(fuzzed):
    _, schema, _ = fuzzed
    for path, model in (
        ("/api/populations", "PopulationConfig"),
        ("/api/simulations", "SimulationConfig"),
    ):
        content = schema["paths"][path]["post"]["requestBody"]["content"]
        for media in ("application/json", "application/yaml"):
            assert content[media]["schema"] == {"$ref": f"#/components/schemas/{model}"}
        assert model in schema["components"]["schemas"]


def test_every_operation_conforms(fuzzed):
    manager, schema, path = fuzzed
    report = _schemathesis(path, manager.url, manager.api_token, "--exclude-tag", WORKER_PLANE)
    expected = _operations(schema, worker_plane=False)
    assert f"Tested: {expected}" in report, report[-3000:]
    with manager.api() as api:  # and it is still up
        assert api.get("/healthz").json() == {"status": "ok"}


def test_worker_plane_conforms(fuzzed):
    manager, schema, path = fuzzed
    report = _schemathesis(path, manager.url, manager.join_token, "--include-tag", WORKER_PLANE)
    assert f"Tested: {_operations(schema, worker_plane=True)}" in report, report[-3000:]
