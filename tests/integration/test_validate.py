"""`populace validate --quick` end to end, as CI runs it: its own manager (SQLite) and worker
processes, every check through the REST API, the report in --out."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from backend.validate.suite import EXIT_FAILED, EXIT_NOT_RUN, EXIT_PASSED

FIGURES = ("voter.png", "sir.png", "hk.png", "deffuant.png", "guess.png")


@pytest.mark.timeout(900)
def test_quick_suite_end_to_end(tmp_path):
    out = tmp_path / "report"
    done = subprocess.run(
        [sys.executable, "-m", "backend.cli", "validate", "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=840,
    )
    results = json.loads((out / "results.json").read_text())
    checks = results["checks"]
    verdicts = {c["verdict"] for c in checks}
    # The exit code says what the verdicts say: a failure wins, then a check not run.
    expected = (
        EXIT_FAILED
        if "fail" in verdicts
        else EXIT_NOT_RUN
        if "not run" in verdicts
        else EXIT_PASSED
    )
    failed = [c for c in checks if c["verdict"] == "fail"]
    assert done.returncode == expected, done.stdout[-3000:] + done.stderr[-3000:]
    assert not failed, failed
    names = {c["name"] for c in checks}
    assert {
        "voter.exit_probability",
        "voter.consensus_rounds",
        "sir.final_size_0.5",
        "sir.final_size_1.5",
        "sir.final_size_2",
        "sir.final_size_3",
        "hk.consensus_0.25",
        "hk.consensus_0.15",
        "deffuant.consensus_0.5",
        "deffuant.clusters_0.25",
        "deffuant.clusters_0.1",
        "guess.half_plus_5",
        "guess.ratio_4_3",
        "reproducibility.same_seed",
        "reproducibility.worker_killed",
    } <= names
    for check in checks:
        assert {"target", "measured", "tolerance", "verdict"} <= check.keys()
        if check["verdict"] == "not run":
            assert check["reason"], check
        else:
            assert check["measured"] is not None and check["target"] is not None, check
        # Every check's line is printed with its verdict.
        assert check["name"] in done.stdout
    # Every check ran: the built-in plugins offer every model the suite plays.
    assert not [c for c in checks if c["verdict"] == "not run"]
    # The disturbed run rode out a real loss: the kill is on its timeline, nothing was lost.
    killed = next(c for c in checks if c["name"] == "reproducibility.worker_killed")
    assert killed["details"]["faults"] and killed["details"]["lost_agents"] == 0, killed
    assert results["mode"] == "quick" and results["wall_s"] > 0
    for name in ("index.html", "report.md", *FIGURES):
        assert (out / name).stat().st_size > 0, name
    assert "voter.png" in (out / "index.html").read_text()
    # A second run into the same folder is refused without --force, in one line.
    again = subprocess.run(
        [sys.executable, "-m", "backend.cli", "validate", "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 2
    assert len(again.stderr.strip().splitlines()) == 1 and "--force" in again.stderr
