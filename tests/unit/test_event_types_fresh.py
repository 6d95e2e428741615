"""The checked-in frontend event types must match the event catalog (`make api-types`)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from backend.events.catalog import EVENTS
from tests.support import ROOT

COMMITTED = ROOT / "frontend" / "src" / "api" / "events.gen.ts"


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> str:
    """The types generated now, into a temporary directory."""
    output = tmp_path_factory.mktemp("event-types") / "events.gen.ts"
    result = subprocess.run(
        [sys.executable, "scripts/gen_event_types.py", "--output", str(output)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return output.read_text()


def test_generated_event_types_are_fresh(fresh):
    assert COMMITTED.read_text() == fresh, (
        "frontend/src/api/events.gen.ts is stale: run make api-types"
    )


def test_the_types_cover_every_event(fresh):
    for event in EVENTS:
        assert f'"{event.event_type}": components["schemas"]["{event.__name__}"]' in fresh
    # A sparse event's optional fields may be absent; the others always carry every field.
    assert "agents?: number | null;" in fresh  # population.progress
    assert "pause_reason: string | null;" in fresh  # simulation.updated
