"""`populace validate`'s bad input (one line, exit 2, nothing started), its exit codes and its
report files, without a cluster."""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime

from backend.validate import report
from backend.validate.command import EXIT_BAD_INPUT, validate
from backend.validate.result import FAIL, PASS, CheckResult, not_run
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
    assert saved["summary"] == {"pass": 1, "fail": 0, "not run": 1}
    assert saved["exit_code"] == EXIT_NOT_RUN and saved["wall_s"] == 12.5
    assert saved["commit"] == "662441a" and "commit 662441a" in (tmp_path / "report.md").read_text()
    for check in saved["checks"]:
        assert {"target", "measured", "tolerance", "verdict"} <= check.keys()
    markdown = (tmp_path / "report.md").read_text()
    assert "![title of voter.exit_probability](voter.png)" in markdown
    assert "from the Markov chain" in markdown and "not run: no" in markdown
    page = (tmp_path / "index.html").read_text()
    assert "<img src='voter.png'" in page and "class='not-run'" in page
