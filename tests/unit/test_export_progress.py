"""`populace simulation export`'s progress line on stderr."""

from __future__ import annotations

import io

from backend import cli_simulate
from backend.cli_simulate import _ExportProgress


def _progress(monkeypatch, fmt: str, live: bool) -> tuple[_ExportProgress, io.StringIO]:
    err = io.StringIO()
    monkeypatch.setattr(cli_simulate.sys, "stderr", err)
    progress = _ExportProgress(7, fmt)
    progress.live = live
    progress.INTERVAL_S = 3600  # one redraw at most in this test
    return progress, err


def test_a_terminal_sees_one_redrawn_line_then_the_summary(monkeypatch):
    progress, err = _progress(monkeypatch, "csv", live=True)
    progress.add(b"round,agent_id,value,status,response\n1,4,2.5,valid,\n")
    progress.add(b"1,5,3.5,valid,\n" * 3)
    assert err.getvalue() == "\rsimulation 7: 1 rows (0.0 MiB) so far"
    progress.finish("out.csv")
    assert err.getvalue().endswith("\r\x1b[Ksimulation 7: exported 4 rows (0.0 MiB) to out.csv\n")


def test_a_pipe_sees_only_the_summary_and_parquet_rows_come_from_the_footer(monkeypatch):
    progress, err = _progress(monkeypatch, "parquet", live=False)
    progress.add(b"PAR1" + b"\n" * 2**20)
    assert err.getvalue() == ""
    progress.finish("stdout")
    assert err.getvalue() == "simulation 7: exported 1.0 MiB to stdout\n"
    progress, err = _progress(monkeypatch, "parquet", live=False)
    progress.add(b"x" * 10)
    progress.finish("d.parquet", rows=1_234_567)
    assert err.getvalue() == "simulation 7: exported 1,234,567 rows (0.0 MiB) to d.parquet\n"
