"""How long the manager takes to notice a dead worker (SIGKILL, no goodbye).

Starts a real manager (SQLite, temporary folder) and single-process worker nodes, kills them one
by one, and times each kill to the `worker.updated` event that says "offline" on the websocket:
what a dashboard user sees. Prints one JSON line.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from websockets.sync.client import connect


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if value := predicate():
                return value
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"timed out waiting for {what}")


def _populace(*args: str) -> list[str]:
    return [sys.executable, "-m", "backend.cli", *args]


def run(kills: int = 5) -> dict:
    with tempfile.TemporaryDirectory(prefix="populace-bench-") as tmp:
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        env = {
            **os.environ,
            "POPULACE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp}/bench.db",
            "POPULACE_API_TOKEN": os.urandom(16).hex(),
            "POPULACE_JOIN_TOKEN": os.urandom(16).hex(),
            "POPULACE_DATA_DIR": str(Path(tmp) / "data"),
        }
        headers = {"Authorization": f"Bearer {env['POPULACE_API_TOKEN']}"}
        log = open(Path(tmp) / "processes.log", "ab")
        manager = subprocess.Popen(
            _populace("manager", "--port", str(port)), env=env, cwd=tmp, stdout=log, stderr=log
        )
        nodes: list[subprocess.Popen] = []
        try:
            _wait(lambda: httpx.get(f"{url}/healthz").status_code == 200, 60, "manager")
            info = httpx.get(f"{url}/api/info", headers=headers).json()
            for _ in range(kills):
                nodes.append(
                    subprocess.Popen(
                        _populace("worker", "--manager", url, "--procs", "1"),
                        env=env,
                        cwd=tmp,
                        stdout=log,
                        stderr=log,
                        start_new_session=True,
                    )
                )

            def online():
                items = httpx.get(f"{url}/api/workers", headers=headers).json()["items"]
                ready = [w for w in items if w["state"] == "online"]
                return ready if len(ready) == kills else None

            workers = _wait(online, 60, f"{kills} workers online")
            by_pid = {w["pid"]: w["id"] for w in workers}
            ws_url = (
                f"ws://127.0.0.1:{port}/ws/events?token={env['POPULACE_API_TOKEN']}&topics=cluster"
            )
            detections = []
            with connect(ws_url, open_timeout=10) as ws:
                ws.recv(timeout=10)  # hello
                for node in nodes:
                    child_pid = int(
                        subprocess.check_output(["pgrep", "-P", str(node.pid)]).split()[0]
                    )
                    worker_id = by_pid[child_pid]
                    # A random phase against the heartbeat cadence, so we sample the whole range.
                    time.sleep(random.uniform(0.0, info["heartbeat_interval_s"]))
                    os.killpg(node.pid, signal.SIGKILL)
                    killed = time.monotonic()
                    while True:
                        event = json.loads(ws.recv(timeout=30))
                        worker = event.get("payload", {}).get("worker", {})
                        if worker.get("id") == worker_id and worker.get("state") == "offline":
                            detections.append(time.monotonic() - killed)
                            break
            return {
                "benchmark": "liveness",
                "kills": kills,
                "heartbeat_interval_s": info["heartbeat_interval_s"],
                "worker_ttl_s": info["worker_ttl_s"],
                "detect_s_min": round(min(detections), 3),
                "detect_s_p50": round(statistics.median(detections), 3),
                "detect_s_max": round(max(detections), 3),
                "target_s": 5.0,
            }
        finally:
            for node in nodes:
                try:
                    os.killpg(node.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                node.wait()
            manager.terminate()
            manager.wait(15)
            log.close()
