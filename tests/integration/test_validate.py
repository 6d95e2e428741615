"""`populace validate --quick` end to end, as CI runs it: its own manager (SQLite) and worker
processes, every check through the REST API, the report in --out."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from backend.llm_local import MODEL_ALIAS, start_local_llm
from backend.validate.sizes import QUICK
from backend.validate.suite import EXIT_FAILED, EXIT_NOT_RUN, EXIT_PASSED
from tests.support import free_port

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


def _validate_with_gemma(
    tmp_path, *args: str, llm: tuple[str, ...] = ("--llm", "local")
) -> tuple[subprocess.CompletedProcess, dict]:
    """`populace validate --quick --llm local ...` in a process of its own: its own manager,
    workers and llama.cpp server, the model assembled under a data folder of the test's (or
    with `llm`, the endpoint named there)."""
    out = tmp_path / "report"
    env = {**os.environ, "POPULACE_DATA_DIR": str(tmp_path / "data")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "backend.cli",
            "validate",
            "--quick",
            *llm,
            "--out",
            str(out),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=840,
        env=env,
    )
    assert done.returncode == EXIT_PASSED, done.stdout[-3000:] + done.stderr[-3000:]
    return done, json.loads((out / "results.json").read_text())


@pytest.mark.timeout(900)
def test_llm_games_with_gemma_are_reported_beside_gama_bench(tmp_path):
    done, results = _validate_with_gemma(tmp_path, "--check", "llm_games")
    checks = {c["name"]: c for c in results["checks"]}
    assert set(checks) == {"llm.public_goods", "llm.el_farol"}
    assert results["summary"]["reported"] == 2 and results["summary"]["fail"] == 0
    for check in checks.values():
        assert check["verdict"] == "reported"
        details = check["details"]
        assert len(details["by_round"]) == len(details["participation"]) == QUICK.llm_rounds
        assert all(0 <= p <= 1 for p in details["participation"] if p is not None)
        assert details["reference"], "no published rows beside the model's"
        assert check["finding"].startswith("Gemma 3 270M")
        assert check["figure"] == "llm_games.png"
    # Whatever the model did, values within each game's range.
    pg = [v for v in checks["llm.public_goods"]["details"]["by_round"] if v is not None]
    assert all(0 <= v <= 20 for v in pg)
    report = (tmp_path / "report" / "report.md").read_text()
    assert "## LLM reference games" in report and "GPT-4o" in report
    assert (tmp_path / "report" / "llm_games.png").stat().st_size > 0
    assert "2 LLM games reported" in done.stdout


@pytest.mark.timeout(900)
def test_the_agentscope_study_with_gemma(tmp_path):
    # The endpoint by URL this time (`--llm URL --model NAME --llm-api completions --llm-server
    # llama_cpp`): a llama.cpp server the test started, probed with GET /v1/models before any
    # cluster starts, and sent its grammar (unconstrained, Gemma 3 270M's answers depend on the
    # CPU: on an AVX-512 Xeon none of them parsed).
    with start_local_llm(free_port(), data_dir=tmp_path / "llm") as gemma:
        llm = ("--llm", gemma.base_url, "--model", MODEL_ALIAS, "--llm-api", "completions")
        llm += ("--llm-server", "llama_cpp")
        done, results = _validate_with_gemma(tmp_path, "--study", "agentscope", llm=llm)
    checks = {c["name"]: c for c in results["checks"]}
    assert set(checks) == {"agentscope.basic", "agentscope.cot", "agentscope.half_plus_5"}
    for check in checks.values():
        assert check["verdict"] == "reported" and check["figure"] == "agentscope.png"
        guesses = check["details"]["guesses_by_round"]
        assert len(guesses) == len(check["details"]["by_round"])
        assert all(0 <= g <= 100 for round_ in guesses for g in round_)
    assert checks["agentscope.half_plus_5"]["target"] == 10.0
    assert "equilibrium 10" in checks["agentscope.half_plus_5"]["finding"]
    assert (tmp_path / "report" / "agentscope.png").stat().st_size > 0
    assert "the agentscope study" in done.stdout
