"""A worker process whose event loop is saturated by a round's CPU work stays online (issue 26,
item 6).

The work is the one that used to take workers offline: exchangeable LLM agents (`bench round
--exchangeable`) against the fake server's toy model. From round 2 on, each agent's prompt
carries its own history, so thousands of distinct prompts each need their answer distribution
read, and the process spends its CPU on requests, logprob trees and draws. The manager asks for
a beat every 0.2 s and takes a worker offline after 1 s of silence, so a worker whose beats
waited behind that work for a second would be declared dead.

The test follows the manager's `worker.updated` events while the worker process has burned
BUSY_CPU_S seconds of CPU on rounds, and asserts it never left `online`. A loop that truly hangs
still takes its worker offline (the heartbeats report the loop's progress and stop by themselves).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

import psutil
import pytest

from bench.llm import Served
from bench.round import EXCHANGEABLE_CONFIG, simulation_body
from tests.support import WORKER_RPC_SECRET, Manager, stop_process, wait_for
from tests.support_populations import YAML
from tests.support_simulations import EventLog, finish, start
from worker_server import plane
from worker_server.lifecycle import StopReason
from worker_server.process import WorkerProcess
from worker_server.settings import WorkerSettings

BUSY_CPU_S = 10.0
AGENTS = 10_000
MODEL = "bench-model"
TIGHT_LIVENESS = {"POPULACE_HEARTBEAT_INTERVAL_S": "0.2", "POPULACE_WORKER_TTL_S": "1.0"}


@pytest.fixture
def toy_server():
    """bench/openai_server.py with the toy language model, in a process of its own (as the
    benchmark runs it), so the test process's GIL does not slow it down."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.openai_server", "--model", MODEL]
        + ["--toy-lm", "--validate", "vllm"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http"), f"the fake server did not start ({proc.poll()})"
        yield Served([url], MODEL, "vllm", (proc.pid,))
    finally:
        stop_process(proc)


def cpu_seconds(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def test_a_worker_busy_with_a_cpu_heavy_round_stays_online(tmp_path, toy_server):
    manager = Manager(
        tmp=tmp_path,
        database_url=f"sqlite+aiosqlite:///{tmp_path}/populace.db",
        extra_env=TIGHT_LIVENESS,
    ).start()
    node = manager.start_workers(procs=1)
    try:
        (worker,) = wait_for(
            lambda: [w for w in manager.workers() if w["state"] == "online"],
            30,
            what="the worker online",
        )
        with manager.api() as api:
            resp = api.post(
                "/api/populations",
                content=EXCHANGEABLE_CONFIG.format(size=AGENTS, seed=5),
                headers=YAML,
            )
            assert resp.status_code == 202, resp.text
            population_id = resp.json()["id"]
            wait_for(
                lambda: api.get(f"/api/populations/{population_id}").json()["status"] == "deployed",
                120,
                what="the population deployed",
            )
            # Rounds enough to keep the worker busy for BUSY_CPU_S whatever the machine's speed:
            # the run is cancelled once it has.
            body = simulation_body(population_id, toy_server, 256, 100, seed=5, exchangeable=True)
            events = EventLog(manager, "cluster")
            try:
                started_cpu = cpu_seconds(worker["pid"])
                sid = start(api, body)["id"]
                # Busy through round 1 (the 48 shared prompts' reads) into round 2 (thousands
                # of distinct prompts), for BUSY_CPU_S of the worker's CPU at least.
                wait_for(
                    lambda: (
                        (run := api.get(f"/api/simulations/{sid}").json())["status"]
                        not in ("pending", "running")
                        or (
                            run["current_round"] >= 1
                            and cpu_seconds(worker["pid"]) - started_cpu >= BUSY_CPU_S
                        )
                    ),
                    600,
                    every=0.5,
                    what=f"the worker to spend {BUSY_CPU_S:g} s of CPU on rounds",
                )
                run = api.get(f"/api/simulations/{sid}").json()
                assert run["status"] == "running", (run["status"], run.get("pause_reason"))
                busy_cpu_s = cpu_seconds(worker["pid"]) - started_cpu
                assert api.post(f"/api/simulations/{sid}/cancel", json={}).status_code == 200
                finish(api, sid)
            finally:
                events.close()
            after = api.get(f"/api/workers/{worker['id']}").json()
    finally:
        stop_process(node)
        manager.stop()

    assert busy_cpu_s >= BUSY_CPU_S
    changes = [
        e["payload"]["worker"]
        for e in events.of("worker.updated")
        if e["payload"]["worker"]["id"] == worker["id"]
    ]
    assert [c["state"] for c in changes if c["state"] != "online"] == [], changes
    assert after["state"] == "online" and after["pid"] == worker["pid"], after


def state(manager: Manager, worker_id: int) -> str:
    with manager.api() as api:
        return api.get(f"/api/workers/{worker_id}").json()["state"]


async def test_a_worker_whose_event_loop_hangs_stops_beating_until_it_runs_again(
    manager_factory, monkeypatch
):
    """Heartbeats come from their own thread, so a hung loop must silence them itself: a loop
    that has not run for LOOP_HUNG_S is hung, not busy. (This worker runs in the test's process,
    on the test's event loop: a blocking call here hangs its loop.)"""
    monkeypatch.setattr(plane, "LOOP_HUNG_S", 1.0)
    manager = manager_factory(extra_env=TIGHT_LIVENESS).start()
    settings = WorkerSettings(
        manager_url=manager.url,
        join_token=manager.join_token,
        port=0,
        procs=1,
        node="hung-node",
        rpc_secret=WORKER_RPC_SECRET,
    )
    worker = WorkerProcess(settings)
    run = asyncio.create_task(worker.run())
    try:
        worker_id = await asyncio.to_thread(
            wait_for, lambda: worker.lifecycle.worker_id, 30, 0.05, "registration"
        )
        await asyncio.to_thread(
            wait_for, lambda: state(manager, worker_id) == "online", 30, 0.05, "online"
        )
        # Blocking on the loop: the worker's loop hangs while the plane's thread runs on.
        wait_for(lambda: state(manager, worker_id) == "offline", 30, 0.1, "offline while hung")
        await asyncio.to_thread(
            wait_for, lambda: state(manager, worker_id) == "online", 30, 0.05, "online again"
        )
        assert worker.lifecycle.worker_id == worker_id, "the same registration beats again"
    finally:
        worker.request_stop(StopReason.SIGNAL)
        await asyncio.wait_for(run, 30)
