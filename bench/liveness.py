"""How long the manager takes to notice a dead worker (SIGKILL, no goodbye).

Starts a real manager and single-process worker nodes, kills them one by one at a random phase
of the heartbeat cadence, and times each kill to the `worker.updated` event that says "offline"
on the websocket: what a dashboard user sees. Prints one JSON line.
"""

from __future__ import annotations

import json
import os
import random
import signal
import statistics
import subprocess
import time

from backend.events.socket_auth import connect_events
from bench.cluster import LocalCluster


def run(kills: int = 5) -> dict:
    with LocalCluster() as cluster:
        info = cluster.api("/api/info")
        nodes = [cluster.start_node(procs=1) for _ in range(kills)]
        by_pid = {w["pid"]: w["id"] for w in cluster.wait_online(kills)}
        detections = []
        with connect_events(cluster.url, cluster.api_token, topics="cluster") as ws:
            ws.recv(timeout=10)  # hello
            for node in nodes:
                child_pid = int(subprocess.check_output(["pgrep", "-P", str(node.pid)]).split()[0])
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
