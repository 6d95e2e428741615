"""populace.v1.WorkerService: what this process is and how loaded it is."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import grpc

from worker_server.rpc import worker_pb2, worker_pb2_grpc
from worker_server.stats import LoadCounters, ProcessSampler


@dataclass(frozen=True)
class ProcessIdentity:
    """Facts fixed for the life of the process."""

    node: str
    address: str
    capacity: int
    version: str
    started_at: float  # seconds since the Unix epoch


class WorkerServicer(worker_pb2_grpc.WorkerServiceServicer):
    def __init__(
        self,
        identity: ProcessIdentity,
        sampler: ProcessSampler,
        load: LoadCounters,
        worker_id: Callable[[], int | None],
    ) -> None:
        self._identity = identity
        self._sampler = sampler
        self._load = load
        # A callable because the id changes when the manager makes us re-register.
        self._worker_id = worker_id

    def info(self) -> worker_pb2.WorkerInfo:
        stats = self._sampler.sample()
        return worker_pb2.WorkerInfo(
            worker_id=self._worker_id() or 0,  # 0 = not registered yet, as the proto says
            node=self._identity.node,
            address=self._identity.address,
            pid=stats.pid,
            agents=self._load.agents,
            capacity=self._identity.capacity,
            cpu_percent=stats.cpu_percent,
            rss_bytes=stats.rss_bytes,
            version=self._identity.version,
            started_at=self._identity.started_at,
        )

    async def GetInfo(  # noqa: N802 - the name is fixed by the proto
        self, request: worker_pb2.GetInfoRequest, context: grpc.aio.ServicerContext
    ) -> worker_pb2.WorkerInfo:
        return self.info()
