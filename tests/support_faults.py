"""Worker nodes a test can kill: started in a process group of their own, the workers online
on them, and the agents each worker hosts."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess

from tests.support import wait_for, worker_client

# Quick detection and re-placement, so the tests wait seconds, not the production defaults.
FAST = {"POPULACE_REAPER_INTERVAL_S": "1", "POPULACE_REPLACE_AFTER_S": "2"}


def online_workers(manager, node: str | None = None) -> list[dict]:
    return [
        w
        for w in manager.workers()
        if w["state"] == "online" and (node is None or w["node"] == node)
    ]


def start_node(manager, name: str, procs: int = 2, **env) -> subprocess.Popen:
    """A worker node in its own process group, so the whole node can be killed at once."""
    proc = manager.start_workers(procs=procs, node=name, env=env, start_new_session=True)
    wait_for(lambda: len(online_workers(manager, name)) == procs, 30, what=f"node {name} online")
    return proc


def kill_node(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    os.killpg(proc.pid, sig)


def hosted_on(addresses: list[str], population_id: int) -> dict[str, int]:
    async def read() -> dict[str, int]:
        out = {}
        for address in addresses:
            async with worker_client(address) as client:
                info = await client.info()
            out[address] = int(info.population_agents.get(str(population_id), 0))
        return out

    return asyncio.run(read())
