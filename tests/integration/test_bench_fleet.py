"""`populace bench fleet` at a toy size on SQLite: every simulated worker registers (verified
over gRPC by the real manager), beats through the worker plane and is online at the end (a
smoke test, not a timed one: no CPU or latency figure is asserted)."""

from __future__ import annotations

import json
import subprocess

import psutil

from tests.support import populace_cmd

KEYS = (
    "benchmark", "database", "workers", "heartbeat_interval_s", "ttl_s", "window_s",
    "manager_cpu_percent", "target_cpu_percent", "beats_per_s", "beat_p50_ms", "beat_p95_ms",
    "beat_max_ms", "errors", "online_at_end", "cluster_first_paint_ms_p50",
    "cluster_first_paint_ms_max", "target_first_paint_ms",
)  # fmt: skip


def _fleet_hosts() -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmdline = p.info["cmdline"] or []
        if "bench.fleet" in cmdline:
            found.append(p)
    return found


def test_bench_fleet_small_fleet_stays_online() -> None:
    before = {p.pid for p in _fleet_hosts()}
    result = subprocess.run(
        populace_cmd(
            "bench", "fleet", "--workers", "20", "--seconds", "3", "--hosts", "2",
            "--database", "sqlite", "--no-dashboard",
        ),
        capture_output=True,
        text=True,
        timeout=240,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    (line,) = [json.loads(x) for x in result.stdout.splitlines() if x.startswith("{")]
    for key in KEYS:
        assert key in line, key
    assert line["benchmark"] == "fleet" and line["database"] == "sqlite"
    assert line["workers"] == 20
    assert line["online_at_end"] == 20, line
    assert line["beats_per_s"] > 0, line
    assert line["heartbeat_interval_s"] > 0 and line["ttl_s"] > 0
    for errors in (line["errors"], line["errors_total"], line["register_errors"]):
        assert not [s for s in errors if s.isdigit() and int(s) >= 500], line
    assert line["cluster_first_paint_ms_p50"] is None  # --no-dashboard
    # Nothing left running: the host processes are gone.
    assert {p.pid for p in _fleet_hosts()} <= before
