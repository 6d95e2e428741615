"""Fixtures for integration tests that drive one real worker process directly over gRPC."""

from __future__ import annotations

import pytest

from tests.support import stop_process, wait_for, worker_client


@pytest.fixture(scope="module")
def worker(shared_manager):
    """The address of one real worker process, registered with the module's manager."""
    proc = shared_manager.start_workers(procs=1)
    try:
        (online,) = wait_for(
            lambda: [w for w in shared_manager.workers() if w["state"] == "online"] or None,
            timeout=30,
            what="a worker online",
        )
        yield online["address"]
    finally:
        stop_process(proc)


@pytest.fixture
async def client(worker):
    """A gRPC client of that worker; the worker is emptied after each test."""
    async with worker_client(worker) as connected:
        yield connected
        await connected.delete_agents(all=True)
