"""A worker that validate may kill: one more worker process on the local cluster that validate
started itself, so the reproducibility check can SIGKILL it mid-run (a node lost) and compare
the run's export with an undisturbed one. A cluster named by --manager has none: validate never
kills a real cluster's workers."""

from __future__ import annotations

import os
import signal
import subprocess
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bench.cluster import LocalCluster


class SpareWorker:
    def __init__(self, cluster: LocalCluster, online: int) -> None:
        self._cluster = cluster
        self._online = online  # workers online without the spare
        self._node: subprocess.Popen | None = None

    def start(self) -> None:
        """Start the spare (a node of one worker process) and wait until it is online, so a
        population deployed next places agents on it."""
        if self._node is None:
            self._node = self._cluster.start_node(procs=1, node="validate-spare")
            self._cluster.wait_online(self._online + 1)

    def kill(self) -> None:
        """SIGKILL the spare's process group (its supervisor and its worker) at once."""
        if self._node is not None and self._node.poll() is None:
            os.killpg(self._node.pid, signal.SIGKILL)
            self._node.wait()
