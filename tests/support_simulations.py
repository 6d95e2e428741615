"""Simulations through the REST API of a running manager: a population of five education levels
deployed, a level-k simulation started, waited for, and its rounds, decisions and events read."""

from __future__ import annotations

import asyncio
import json
import threading

from tests.support import Manager, wait_for, worker_client
from tests.support_populations import deploy_population, population_yaml

# Each education level's depth of reasoning in tests/configs/education.yaml.
DEPTHS = {"primary school": 0, "high school": 1, "bachelor": 1, "master": 2, "doctorate": 3}
FINAL = {"completed", "failed", "cancelled"}


def deploy(manager: Manager, size: int = 1000, name: str = "players") -> int:
    """tests/configs/education.yaml deployed as `name` with `size` agents: its id."""
    with manager.api() as api:
        return deploy_population(api, population_yaml("education", name=name, size=size))["id"]


def level_k(pid: int, **overrides) -> dict:
    return {
        "population_id": pid,
        "name": "level-k",
        "rounds": 6,
        "rule": {"preset": "1/2+5"},
        "policy": {
            "kind": "level_k",
            "depth_attribute": "education",
            "depth_by_category": DEPTHS,
            "noise_std": 2.0,
        },
        "segment_by": ["education"],
        "seed": 11,
        **overrides,
    }


def start(api, config: dict) -> dict:
    resp = api.post("/api/simulations", json=config)
    assert resp.status_code == 202, resp.text
    return resp.json()


def finish(api, sid: int, timeout: float = 120) -> dict:
    return wait_for(
        lambda: (s := api.get(f"/api/simulations/{sid}").json())["status"] in FINAL and s,
        timeout,
        what=f"simulation {sid} to end",
    )


def rounds_of(api, sid: int) -> list[dict]:
    resp = api.get(f"/api/simulations/{sid}/rounds")
    assert resp.status_code == 200, resp.text
    return resp.json()["items"]


def export(api, sid: int, fmt: str, **params) -> bytes:
    resp = api.get(f"/api/simulations/{sid}/decisions", params={"format": fmt, **params})
    assert resp.status_code == 200, resp.text
    return resp.content


class EventLog:
    """The simulation's websocket events, read in a thread from before the POST."""

    def __init__(self, manager: Manager, topics: str) -> None:
        self._connection = manager.events(topics=topics)
        self.ws = self._connection.__enter__()
        self.events: list[dict] = []
        self.ws.recv(timeout=10)  # hello
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            for message in self.ws:
                self.events.append(json.loads(message))
        except Exception:
            pass

    def of(self, kind: str) -> list[dict]:
        return [e for e in self.events if e["type"] == kind]

    def close(self) -> None:
        self._connection.__exit__(None, None, None)


def rounds_running(addresses: list[str]) -> int:
    async def total() -> int:
        running = 0
        for address in addresses:
            async with worker_client(address) as client:
                running += (await client.info()).rounds_running
        return running

    return asyncio.run(total())
