"""The checked-in frontend API types must match the manager's OpenAPI (`make api-types`)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support import ROOT

COMMITTED = ROOT / "frontend" / "src" / "api" / "schema.d.ts"


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> str:
    """The types generated now, into a temporary directory."""
    output = tmp_path_factory.mktemp("api-types") / "schema.d.ts"
    result = subprocess.run(
        [sys.executable, "scripts/gen_api_types.py", "--output", str(output)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return output.read_text()


def test_generated_api_types_are_fresh(fresh):
    assert COMMITTED.read_text() == fresh, (
        "frontend/src/api/schema.d.ts is stale: run make api-types"
    )


def test_the_types_cover_the_api(fresh):
    # Paths and the models the dashboard reads, by the names types.ts uses.
    for name in ('"/api/populations"', "PopulationOut:", "SimulationDetail:", "WorkerOut:"):
        assert name in fresh, name
