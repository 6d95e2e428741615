"""The `populace` command: help, schema migrations, and the one-command demo."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading

import httpx
import pytest

from tests.support import descendants, free_port, pid_alive, populace_cmd, wait_for


def _run(*args: str, env: dict | None = None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        populace_cmd(*args),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )


def test_help_lists_every_command():
    out = _run("--help")
    assert out.returncode == 0
    for command in ("manager", "worker", "demo", "db"):
        assert re.search(rf"^\W*{command}\b", out.stdout, re.MULTILINE), out.stdout
    worker_help = _run("worker", "--help").stdout
    for option in ("--manager", "--join-token", "--host", "--port", "--procs"):
        assert option in worker_help


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_db_upgrade_and_downgrade(backend, request, tmp_path):
    url = (
        f"sqlite+aiosqlite:///{tmp_path}/cli.db"
        if backend == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    env = {"POPULACE_DATABASE_URL": url}
    up = _run("db", "upgrade", env=env)
    assert up.returncode == 0, up.stderr
    assert "at revision 0003_simulations" in up.stdout
    down = _run("db", "downgrade", "base", env=env)
    assert down.returncode == 0, down.stderr
    assert "at revision base" in down.stdout


def test_bad_database_url_is_a_clear_cli_error():
    out = _run("db", "upgrade", env={"POPULACE_DATABASE_URL": "mysql://x/y"})
    assert out.returncode != 0
    assert "database_url" in out.stderr


def test_worker_without_join_token_is_a_clear_cli_error():
    env = {k: v for k, v in os.environ.items() if k != "POPULACE_JOIN_TOKEN"}
    out = subprocess.run(
        populace_cmd("worker", "--manager", "http://127.0.0.1:9"),
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert out.returncode != 0
    assert "join-token" in out.stderr


def test_demo_runs_manager_and_two_workers_and_ctrl_c_leaves_nothing(tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("POPULACE_")}
    demo = subprocess.Popen(
        populace_cmd("demo", "--port", str(port)),
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(demo.stdout), daemon=True).start()
    try:
        token_line = wait_for(
            lambda: next((ln for ln in lines if "API token:" in ln), None),
            timeout=90,
            what="demo banner",
        )
        token = token_line.rsplit(":", 1)[1].strip()
        assert any(f"http://127.0.0.1:{port}/#token={token}" in ln for ln in lines)
        headers = {"Authorization": f"Bearer {token}"}

        def two_online():
            items = httpx.get(f"http://127.0.0.1:{port}/api/workers", headers=headers).json()[
                "items"
            ]
            return [w for w in items if w["state"] == "online"] if len(items) == 2 else None

        wait_for(two_online, timeout=60, what="two demo workers online")
        tree = [demo.pid, *descendants(demo.pid)]
        assert len(tree) >= 4, "demo, manager, worker supervisor and its processes"
        assert (tmp_path / "populace.db").is_file(), "the demo runs on SQLite in the working folder"

        demo.send_signal(signal.SIGINT)
        assert demo.wait(timeout=30) == 0
        wait_for(lambda: not any(pid_alive(p) for p in tree), timeout=10, what="no process left")
    finally:
        if demo.poll() is None:
            demo.kill()
