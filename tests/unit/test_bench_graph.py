"""`populace bench graph` at a small size: one JSON line whose figures agree with each other."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bench.graph import KINDS, run


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_reports_its_graph(kind):
    result = run(kind=kind, agents=2000, seed=3)
    assert result["kind"] == kind
    assert result["edges"] > 0
    assert result["file_bytes"] >= 8 * (result["nodes"] + 1) + 8 * result["edges"]
    assert 0 <= result["cut_fraction_2_parts"] <= 1
    assert result["read_rows"] == result["nodes"] // 2
    if kind == "cliques":
        assert result["components"] == 200 and result["cut_fraction_2_parts"] == 0


def test_the_command_prints_one_json_line():
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "backend.cli",
            "bench",
            "graph",
            "--kind",
            "cliques",
            "--agents",
            "1000",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    (line,) = done.stdout.strip().splitlines()
    assert json.loads(line)["mean_degree"] == 9.0
