"""One worker process, in-process, with no manager at all: nothing listens at its manager URL.

Everything that needs the manager's answers is in tests/integration/test_worker_process_lifecycle.py.
"""

import asyncio

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support import free_port, wait_until
from worker_server import lifecycle
from worker_server.lifecycle import StopReason
from worker_server.process import WorkerProcess
from worker_server.settings import WorkerSettings

# After two failed tries the worker backs off for an hour: only an interrupted wait can end
# the run within the test's hang guard.
HOUR_S = 3600.0


def an_hour_after_two_failures(failures: int, **_: float) -> float:
    return 0.0 if failures < 2 else HOUR_S


async def test_waits_for_an_unreachable_manager_serving_grpc_and_still_stops_promptly(
    caplog, monkeypatch
):
    monkeypatch.setattr(lifecycle, "backoff_delay", an_hour_after_two_failures)
    url = f"http://127.0.0.1:{free_port()}"  # connection refused: nothing listens there
    worker = WorkerProcess(WorkerSettings(manager_url=url, join_token="tok", port=0, procs=1))
    caplog.set_level("WARNING", logger="populace.worker")
    run = asyncio.create_task(worker.run())
    await wait_until(lambda: worker.lifecycle.failures >= 2, what="two failed registrations")
    assert f"waiting for manager at {url} (ConnectError" in caplog.text
    assert worker.lifecycle.worker_id is None

    # Unregistered, but already serving: health answers while the manager is away.
    async with grpc.aio.insecure_channel(worker.address) as channel:
        health = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=5
        )
    assert health.status == health_pb2.HealthCheckResponse.SERVING

    # Stopping cuts the hour-long backoff short (the timeout only guards against a hang).
    worker.request_stop(StopReason.SIGNAL)
    assert await asyncio.wait_for(run, 60) == 0
