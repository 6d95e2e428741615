"""Deploying a population of 10^6 agents on Postgres, stage by stage.

Starts a real manager on a fresh Postgres database and a worker node, POSTs a population config
(three distributions, template personas), and reads the deploy's stage timings from its
`population.progress` events. In the same run: a plain asyncpg COPY of the very same rows into
an identical table (the floor for persisting), and the p95 of agent-browser pages deep into the
10^6 rows over HTTP. Prints one JSON line.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import random
import statistics
import time
import uuid
from collections.abc import Iterator

import asyncpg
import httpx

from backend.events.socket_auth import connect_events
from bench.cluster import LocalCluster, wait_until

CONFIG = """
name: deploy-benchmark
size: {size}
seed: 7
distributions:
  - name: education
    categories:
      - {{name: primary school, weight: 0.2}}
      - {{name: high school, weight: 0.3}}
      - {{name: bachelor, weight: 0.3}}
      - {{name: doctorate, weight: 0.2}}
  - name: occupation
    categories:
      - {{name: clerk, weight: 0.5}}
      - {{name: engineer, weight: 0.3}}
      - {{name: game theory professor, weight: 0.2}}
  - name: age
    bins:
      - {{name: "18-29", min: 18, max: 29, weight: 0.3}}
      - {{name: "30-59", min: 30, max: 59, weight: 0.5}}
      - {{name: "60-90", min: 60, max: 90, weight: 0.2}}
persona:
  mode: template
  template: "You are a {{occupation}} aged {{age_value}} whose highest education is {{education}}."
"""


def _plain(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://")


@contextlib.contextmanager
def scratch_database(admin_url: str) -> Iterator[str]:
    """A fresh Postgres database for one benchmark run (its URL), dropped afterwards."""
    database = f"populace_bench_{uuid.uuid4().hex[:8]}"
    asyncio.run(_admin(admin_url, f'CREATE DATABASE "{database}"'))
    try:
        yield f"{admin_url.rsplit('/', 1)[0]}/{database}"
    finally:
        asyncio.run(_admin(admin_url, f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))


async def _admin(admin_url: str, sql: str) -> None:
    conn = await asyncpg.connect(_plain(admin_url))
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def _raw_copy_s(database_url: str, population_id: int) -> float:
    """COPY the population's rows, as exported from the store, into an identical table."""
    conn = await asyncpg.connect(_plain(database_url))
    try:
        buffer = io.BytesIO()
        await conn.copy_from_query(
            "SELECT * FROM agents WHERE population_id = $1",
            population_id,
            output=buffer,
            format="binary",
        )
        await conn.execute("CREATE TABLE agents_raw (LIKE agents INCLUDING ALL)")
        buffer.seek(0)
        started = time.perf_counter()
        await conn.copy_to_table("agents_raw", source=buffer, format="binary")
        return time.perf_counter() - started
    finally:
        await conn.close()


def _page_p95_ms(cluster: LocalCluster, population_id: int, size: int, samples: int = 60) -> float:
    base = population_id << 32
    timings = []
    with httpx.Client(base_url=cluster.url, headers=cluster.headers, timeout=30) as client:
        for _ in range(samples):
            after = base + random.randrange(size // 2, size - 200)  # deep into the rows
            started = time.perf_counter()
            resp = client.get(
                "/api/agents", params={"population_id": population_id, "after": after, "limit": 100}
            )
            timings.append((time.perf_counter() - started) * 1000)
            resp.raise_for_status()
            assert len(resp.json()["items"]) == 100
    return statistics.quantiles(timings, n=20)[-1]


def run(agents: int, procs: int, admin_url: str) -> dict:
    with (
        scratch_database(admin_url) as database_url,
        LocalCluster(
            POPULACE_DATABASE_URL=database_url,
            # The manager refuses populations above its limit (10^6 unless raised).
            POPULACE_MAX_POPULATION_SIZE=str(max(agents, 1_000_000)),
        ) as cluster,
    ):
        cluster.start_node(procs=procs)
        cluster.wait_online(procs)
        started = time.perf_counter()
        resp = httpx.post(
            f"{cluster.url}/api/populations",
            content=CONFIG.format(size=agents),
            headers={**cluster.headers, "Content-Type": "application/yaml"},
            timeout=60,
        )
        resp.raise_for_status()
        population_id = resp.json()["id"]
        topics = f"population:{population_id}"
        with connect_events(cluster.url, cluster.api_token, topics=topics) as ws:
            while True:
                payload = json.loads(ws.recv(timeout=300)).get("payload", {})
                if payload.get("stage") == "failed":
                    raise RuntimeError(f"deploy failed: {payload.get('error')}")
                if payload.get("stage") == "deployed":
                    timings = payload["timings"]
                    break
        total_s = time.perf_counter() - started
        wait_until(
            lambda: cluster.api(f"/api/populations/{population_id}")["status"] == "deployed",
            30,
            "deployed",
        )
        page_p95 = _page_p95_ms(cluster, population_id, agents)
        raw_copy_s = asyncio.run(_raw_copy_s(database_url, population_id))
    return {
        "benchmark": "deploy",
        "agents": agents,
        "procs": procs,
        "database": "postgresql",
        **{k: timings[k] for k in ("sample_s", "persona_s", "place_s", "persist_s", "create_s")},
        "total_s": round(total_s, 3),
        "raw_copy_s": round(raw_copy_s, 3),
        "persist_vs_raw_copy": round(timings["persist_s"] / raw_copy_s, 3),
        "agents_page_p95_ms": round(page_p95, 2),
    }
