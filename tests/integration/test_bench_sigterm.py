"""`populace bench ...` stopped with SIGTERM (as `timeout` or `kill` stop it) ends every process
it started and drops its scratch database (issue 26, item 6): before, its manager, worker node
and fake servers were left running with no parent."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess

import asyncpg
import httpx
import psutil

from tests.conftest import PG_ADMIN_URL
from tests.support import pid_alive, populace_cmd, wait_for

# The processes a `bench round` starts, by what their command line runs.
STARTED = {
    "manager": "backend.cli manager",
    "node": "backend.cli worker",
    "worker process": "worker_server.process",
    "fake server": "bench.openai_server",
}


def started_by(bench: psutil.Process) -> dict[str, list[psutil.Process]]:
    found: dict[str, list[psutil.Process]] = {kind: [] for kind in STARTED}
    for child in bench.children(recursive=True):
        try:
            command = " ".join(child.cmdline())
        except psutil.Error:
            continue
        for kind, marker in STARTED.items():
            if marker in command:
                found[kind].append(child)
    return found


def running(manager: psutil.Process) -> bool:
    """The bench's simulation is running: asked of its manager with the token it was given."""
    command = manager.cmdline()
    port = command[command.index("--port") + 1]
    token = manager.environ()["POPULACE_API_TOKEN"]
    resp = httpx.get(
        f"http://127.0.0.1:{port}/api/simulations",
        headers={"Authorization": f"Bearer {token}"},
        timeout=10,
    )
    return any(s["status"] == "running" for s in resp.json()["items"])


async def databases() -> set[str]:
    conn = await asyncpg.connect(PG_ADMIN_URL.replace("postgresql+asyncpg", "postgresql"))
    try:
        return {r["datname"] for r in await conn.fetch("SELECT datname FROM pg_database")}
    finally:
        await conn.close()


def kill_quietly(process: psutil.Process) -> None:
    try:  # psutil checks the pid was not reused by another process first
        process.kill()
        process.wait(10)
    except psutil.Error:
        pass


def test_sigterm_mid_run_leaves_no_process_behind(postgres_server_url, tmp_path) -> None:
    out = open(tmp_path / "bench.log", "wb")
    bench = subprocess.Popen(
        populace_cmd(
            "bench", "round", "--policy", "llm", "--agents", "2000", "--rounds", "50",
            "--procs", "1", "--servers", "1", "--latency", "0.05", "--concurrency", "20",
        ),
        stdout=out,
        stderr=subprocess.STDOUT,
        env={**os.environ, "POPULACE_TEST_PG_ADMIN_URL": PG_ADMIN_URL},
    )  # fmt: skip
    children: list[tuple[psutil.Process, str]] = []
    try:
        found = wait_for(
            lambda: (f := started_by(psutil.Process(bench.pid))) and all(f.values()) and f,
            120,
            what="the bench's manager, node, worker process and fake server",
        )
        children = [(p, f"{kind} {p.pid}") for kind, ps in found.items() for p in ps]
        manager = found["manager"][0]
        database = manager.environ()["POPULACE_DATABASE_URL"].rsplit("/", 1)[1]
        wait_for(lambda: running(manager), 120, what="the simulation to run")

        bench.send_signal(signal.SIGTERM)
        returncode = bench.wait(120)
        alive = [what for p, what in children if pid_alive(p.pid)]
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
        for process, _ in children:  # leave nothing behind, even when the test fails
            kill_quietly(process)
        out.close()

    assert alive == [], f"still running after the bench exited: {alive}"
    assert database not in asyncio.run(databases()), "the scratch database was dropped"
    log = (tmp_path / "bench.log").read_text(errors="replace")[-3000:]
    assert returncode == 128 + signal.SIGTERM, log
