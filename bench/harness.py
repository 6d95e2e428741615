"""What the benchmarks that enter through the manager share (`bench synthetic`, `bench round`).

A scratch Postgres database (bench.deploy.scratch_database) and a LocalCluster on it are the
caller's; here: deploying a population with `POST /api/populations` and waiting until it is
deployed, and running a simulation with `POST /api/simulations` while reading its round timings
from the manager's websocket events (bench.recovery.Events, as a dashboard sees them) and the CPU
seconds of the manager, the worker node and Postgres (plus any other processes the caller names)
with psutil, from just before the POST to the simulation's end.

round_s is a round's first `round.progress` (sent when the round starts) to its `round.completed`
(sent after the round and its decisions are committed).
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from dataclasses import dataclass

import asyncpg
import httpx
import psutil

from bench.cluster import LocalCluster, wait_until
from bench.deploy import _plain
from bench.recovery import Events


async def decisions_persisted(database_url: str, simulation_id: int) -> int:
    conn = await asyncpg.connect(_plain(database_url))
    try:
        return await conn.fetchval(
            "SELECT count(*) FROM decisions WHERE simulation_id = $1", simulation_id
        )
    finally:
        await conn.close()


async def postgres_pids(database_url: str) -> set[int]:
    """Postgres processes serving the scratch database, and the server's background ones."""
    conn = await asyncpg.connect(_plain(database_url))
    try:
        rows = await conn.fetch(
            "SELECT pid FROM pg_stat_activity "
            "WHERE (datname = current_database() OR backend_type <> 'client backend') "
            "AND pid <> pg_backend_pid()"
        )
        return {r["pid"] for r in rows}
    finally:
        await conn.close()


def cpu(pids: set[int]) -> dict[int, float]:
    """CPU seconds (user + system) of each process still alive."""
    seconds = {}
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
            seconds[pid] = t.user + t.system
        except psutil.Error:
            pass
    return seconds


def tree(pid: int) -> set[int]:
    process = psutil.Process(pid)
    return {pid, *(c.pid for c in process.children(recursive=True))}


def spent(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds between two readings; a process new at the end counts from zero (one that
    exited in between is lost: the manager's pool keeps its connections, so few are)."""
    return sum(after[pid] - before.get(pid, 0.0) for pid in after)


def round_event(payload_round: int, kind: str, sid: int):
    def match(event: dict) -> bool:
        payload = event.get("payload", {})
        return (
            event["type"] == kind
            and payload.get("simulation_id") == sid
            and payload.get("round") == payload_round
        )

    return match


def deploy(cluster: LocalCluster, config_yaml: str, timeout_s: float = 1800) -> tuple[int, float]:
    """POST the population config and wait until it is deployed: (population id, seconds)."""
    started = time.perf_counter()
    post = httpx.post(
        f"{cluster.url}/api/populations",
        content=config_yaml,
        headers={**cluster.headers, "Content-Type": "application/yaml"},
        timeout=120,
    )
    post.raise_for_status()
    population_id = post.json()["id"]

    def deployed() -> bool:
        status = cluster.api(f"/api/populations/{population_id}")["status"]
        if status == "failed":
            raise RuntimeError("the population failed to deploy")
        return status == "deployed"

    wait_until(deployed, timeout_s, "deployed")
    return population_id, time.perf_counter() - started


@dataclass
class Run:
    """One simulation run through the manager, as `simulate` measured it."""

    simulation_id: int
    round_s: list[float]
    # Before each round: the POST (round 1) or the previous round.completed to its start
    # (negative: it started while the previous round was still being stored).
    gaps_s: list[float]
    # From each round's start to the next one's: how often rounds go by.
    periods_s: list[float]
    wall_s: float
    cpu_s: dict[str, float]
    rounds: list[dict]  # GET /api/simulations/{id}/rounds items
    persisted: int


def _follow_rounds(
    events: Events, sid: int, rounds: int, posted: float, timeout_s: float
) -> tuple[list[float], list[float], list[float]]:
    """Each round's duration, the gap before it, and its start (monotonic), from the events."""
    round_s, gaps_s, starts = [], [], []
    last_done = last_began = posted
    for number in range(1, rounds + 1):
        # A round starts while the one before is still being stored (its round.completed
        # may come after this round's first round.progress): look from the last start.
        began = events.first(round_event(number, "round.progress", sid), last_began, timeout_s)
        done = events.first(round_event(number, "round.completed", sid), began, timeout_s)
        last_began = began
        starts.append(began)
        round_s.append(done - began)
        gaps_s.append(began - last_done)
        last_done = done
    return round_s, gaps_s, starts


def simulate(
    cluster: LocalCluster,
    database_url: str,
    node: subprocess.Popen,
    body: dict,
    others: dict[str, set[int]] | None = None,
    timeout_s: float = 1800,
) -> Run:
    """POST the simulation `body` and follow it to its end: round timings from events, CPU
    seconds of the manager, the worker node, Postgres and the `others` (name: pids)."""
    rounds = body["rounds"]
    events = Events(cluster, "simulation:*")
    time.sleep(0.5)  # the socket is subscribed before the run starts
    assert cluster.manager is not None
    manager_pids, worker_pids = tree(cluster.manager.pid), tree(node.pid)
    pg_pids = asyncio.run(postgres_pids(database_url))
    others = others or {}
    cpu_before = {
        "manager": cpu(manager_pids),
        "workers": cpu(worker_pids),
        "postgres": cpu(pg_pids),
        **{name: cpu(pids) for name, pids in others.items()},
    }
    posted = time.monotonic()
    resp = httpx.post(
        f"{cluster.url}/api/simulations", json=body, headers=cluster.headers, timeout=120
    )
    resp.raise_for_status()
    sid = resp.json()["id"]
    try:
        round_s, gaps_s, starts = _follow_rounds(events, sid, rounds, posted, timeout_s)
        wait_until(
            lambda: cluster.api(f"/api/simulations/{sid}")["status"] == "completed", 600, "done"
        )
        wall_s = time.monotonic() - posted
    finally:
        events.close()
    # Postgres backends opened during the run count too (from zero).
    pg_after = asyncio.run(postgres_pids(database_url)) | pg_pids
    cpu_after = {
        "manager": cpu(tree(cluster.manager.pid) | manager_pids),
        "workers": cpu(tree(node.pid) | worker_pids),
        "postgres": cpu(pg_after),
        **{name: cpu(pids) for name, pids in others.items()},
    }
    cpu_s = {k: round(spent(cpu_before[k], cpu_after[k]), 2) for k in cpu_before}
    return Run(
        simulation_id=sid,
        round_s=round_s,
        gaps_s=gaps_s,
        periods_s=[b - a for a, b in zip(starts, starts[1:], strict=False)],
        wall_s=wall_s,
        cpu_s=cpu_s,
        rounds=cluster.api(f"/api/simulations/{sid}/rounds")["items"],
        persisted=asyncio.run(decisions_persisted(database_url, sid)),
    )
