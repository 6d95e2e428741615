"""`populace bench round --policy llm` at a toy size: it runs end to end and reports its fields
(a smoke test, not a timed one: the figures belong in BENCHMARKS.md)."""

from __future__ import annotations

import json
import os
import subprocess

from tests.conftest import PG_ADMIN_URL
from tests.support import populace_cmd


def test_bench_round_llm_reports_one_request_per_agent(postgres_server_url) -> None:
    result = subprocess.run(
        populace_cmd(
            "bench", "round", "--policy", "llm", "--agents", "200", "--latency", "0.05",
            "--concurrency", "50",
        ),
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "POPULACE_TEST_PG_ADMIN_URL": PG_ADMIN_URL},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    (line,) = [json.loads(x) for x in result.stdout.splitlines() if x.startswith("{")]
    assert line["agents"] == 200 and line["endpoints"] == 2 and line["concurrency"] == 50
    assert line["requests_per_agent"] == 1, line
    assert line["llm_requests"] == line["direct"]["requests"] == 200
    assert line["answered"] == line["n_valid"] == line["decisions_persisted"] == 200, line
    assert line["direct"]["answered"] == 200 and line["direct"]["errors"] == 0
    for key in ("round_s", "round_s_direct", "platform_vs_direct", "cpu_s"):
        assert key in line
    for who in ("workers", "manager", "postgres", "fake_servers"):
        assert who in line["cpu_s"] and who in line["cpu_us_per_agent_round"]
    assert "persist" in line["direct"]["what"]


def test_bench_round_llm_batched_sends_prompt_arrays(postgres_server_url) -> None:
    result = subprocess.run(
        populace_cmd(
            "bench", "round", "--policy", "llm", "--agents", "200", "--latency", "0.05",
            "--concurrency", "8", "--batch-size", "8",
        ),
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "POPULACE_TEST_PG_ADMIN_URL": PG_ADMIN_URL},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    (line,) = [json.loads(x) for x in result.stdout.splitlines() if x.startswith("{")]
    assert line["batch_size"] == 8 and line["batched_requests"] is True
    # Two worker processes, 100 agents each: 13 requests of up to 8 prompts each.
    assert line["llm_requests"] == 26, line
    assert line["answered"] == line["n_valid"] == line["decisions_persisted"] == 200, line
    assert line["direct"]["requests"] == 25 and line["direct"]["answered"] == 200
    assert line["direct"]["errors"] == 0
