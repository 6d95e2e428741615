"""`populace validate`'s bad input (one line, exit 2, nothing started), its exit codes and its
report files, without a cluster."""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime

from backend.validate import report
from backend.validate.command import EXIT_BAD_INPUT, validate
from backend.validate.result import FAIL, PASS, REPORTED, CheckResult, not_run
from backend.validate.suite import EXIT_FAILED, EXIT_NOT_RUN, EXIT_PASSED, exit_code, line


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def result(name: str, verdict: str) -> CheckResult:
    return CheckResult(name, f"title of {name}", 1.0, 1.0, "± 0.1", verdict)


def test_an_out_folder_with_files_is_refused_without_force(tmp_path, capsys):
    (tmp_path / "old.txt").write_text("keep me")
    code = validate(tmp_path, quick=True, force=False, manager="http://127.0.0.1:1", token="t")
    assert code == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "already holds files" in err and "--force" in err
    assert (tmp_path / "old.txt").read_text() == "keep me"


def test_an_out_that_is_a_file_is_refused(tmp_path, capsys):
    path = tmp_path / "report"
    path.write_text("")
    assert validate(path, True, False, "http://127.0.0.1:1", "t") == EXIT_BAD_INPUT
    assert "is a file" in capsys.readouterr().err


def test_an_unreachable_manager_is_one_line_with_the_fix(tmp_path, capsys):
    url = f"http://127.0.0.1:{free_port()}"
    code = validate(tmp_path / "out", quick=True, force=False, manager=url, token="t")
    assert code == EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"cannot reach the manager at {url}" in err
    assert "connection refused" in err and "leave out --manager" in err


def test_exit_codes_say_failed_and_not_run():
    assert exit_code([result("a", PASS)]) == EXIT_PASSED
    assert exit_code([result("a", PASS), not_run("b", "b", "missing")]) == EXIT_NOT_RUN
    assert exit_code([result("a", FAIL), not_run("b", "b", "missing")]) == EXIT_FAILED
    assert len({EXIT_PASSED, EXIT_FAILED, EXIT_NOT_RUN, EXIT_BAD_INPUT}) == 4


def test_a_line_shows_target_measured_tolerance_verdict_and_reason():
    text = line(not_run("deffuant.consensus_0.5", "Deffuant", "the manager refused it"))
    assert text.startswith("NOT RUN")
    assert "target" in text and "measured" in text and "tolerance" in text
    assert "(the manager refused it)" in text


def test_the_report_files_hold_every_check(tmp_path):
    checks = [result("voter.exit_probability", PASS), not_run("deffuant.x", "Deffuant", "no")]
    checks[0].figure = "voter.png"
    checks[0].how = "from the Markov chain"
    doc = report.document(
        checks,
        command="populace validate --quick --out x",
        mode="quick",
        cluster="local",
        started=datetime(2026, 1, 1, tzinfo=UTC),
        wall_s=12.5,
        code=exit_code(checks),
        commit="662441a",
    )
    report.write(tmp_path, doc)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["summary"] == {"pass": 1, "fail": 0, "not run": 1, "reported": 0}
    assert saved["exit_code"] == EXIT_NOT_RUN and saved["wall_s"] == 12.5
    assert saved["commit"] == "662441a" and "commit 662441a" in (tmp_path / "report.md").read_text()
    for check in saved["checks"]:
        assert {"target", "measured", "tolerance", "verdict"} <= check.keys()
    markdown = (tmp_path / "report.md").read_text()
    assert "![title of voter.exit_probability](voter.png)" in markdown
    assert "from the Markov chain" in markdown and "not run: no" in markdown
    page = (tmp_path / "index.html").read_text()
    assert "<img src='voter.png'" in page and "class='not-run'" in page


def test_an_unreachable_llm_is_one_line_before_any_cluster_starts(tmp_path, capsys):
    url = f"http://127.0.0.1:{free_port()}/v1"
    # No --manager: a local cluster would start if the model were not checked first.
    code = validate(tmp_path / "out", True, False, None, None, llm=url, model="m")
    assert code == EXIT_BAD_INPUT
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1
    assert f"--llm {url} did not answer" in err and "--llm local" in err
    assert "starting a local manager" not in captured.out


def test_an_llm_that_is_not_a_url_or_lacks_a_model_is_refused(tmp_path, capsys):
    assert validate(tmp_path / "a", True, False, None, None, llm="gemma") == EXIT_BAD_INPUT
    assert "give an endpoint's base URL" in capsys.readouterr().err
    url = "http://127.0.0.1:1/v1"
    assert validate(tmp_path / "b", True, False, None, None, llm=url) == EXIT_BAD_INPUT
    assert "needs --model NAME" in capsys.readouterr().err


def test_reported_llm_games_leave_the_exit_code_alone():
    assert exit_code([result("a", PASS), result("llm.el_farol", REPORTED)]) == EXIT_PASSED


def test_the_report_puts_llm_games_in_their_own_table_with_their_findings(tmp_path):
    game = CheckResult(
        "llm.public_goods",
        "Public goods: Gemma",
        None,
        7.5,
        "not judged",
        REPORTED,
        finding="Gemma gave 5.0 in round 1 and 10.0 in round 3.",
        details={
            "by_round": [5.0, None, 10.0],
            "reference": {"GPT-4o": [6.7, 0.0]},
            "participation": [1.0, 0.4, 0.9],
            "rounds_below_floor": 1,
        },
    )
    doc = report.document(
        [result("voter.exit_probability", PASS), game],
        command="populace validate --llm local",
        mode="quick",
        cluster="local",
        started=datetime(2026, 1, 1, tzinfo=UTC),
        wall_s=1.0,
        code=EXIT_PASSED,
        commit=None,
    )
    report.write(tmp_path, doc)
    assert doc["summary"]["reported"] == 1
    markdown = (tmp_path / "report.md").read_text()
    assert "## LLM reference games" in markdown
    # The main table's row, then the LLM table's.
    _, row = [line for line in markdown.splitlines() if line.startswith("| Public goods")]
    assert "5 → 10" in row and "GPT-4o 6.7 → 0" in row and "40%" in row
    assert "no (1 rounds below)" in row
    assert "Gemma gave 5.0 in round 1" in markdown
    page = (tmp_path / "index.html").read_text()
    assert "<h2>LLM reference games</h2>" in page and "class='finding'" in page
    assert "1 LLM games reported" in page


def _cli(*args: str):
    from typer.testing import CliRunner

    from backend.cli import app

    return CliRunner().invoke(app, ["validate", *args])


def test_llm_checks_and_options_without_llm_are_refused_in_one_line(tmp_path):
    out = str(tmp_path / "out")
    for args, words in (
        (("--check", "llm_games"), "--check llm_games needs --llm"),
        (("--model", "m"), "--model, --llm-api and --llm-server go with --llm"),
        (("--llm-server", "vllm"), "--model, --llm-api and --llm-server go with --llm"),
        (("--llm", "local", "--llm-api", "grpc"), "--llm-api grpc: one of completions, chat"),
        (("--llm", "local", "--llm-server", "tgi"), "--llm-server tgi: one of vllm, llama_cpp"),
        (("--study", "nope"), "unknown --study nope; one of agentscope"),
        (("--study", "agentscope", "--check", "voter"), "leave out --check"),
    ):
        done = _cli("--out", out, *args)
        assert done.exit_code == EXIT_BAD_INPUT, (args, done.output)
        assert words in done.output, (args, done.output)
    assert not (tmp_path / "out").exists()  # refused before anything was written
