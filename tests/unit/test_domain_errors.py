"""Domain refusals become HTTP answers in one place (backend.api.errors): each kind its status,
the message its detail, whatever attributes a refusal carries of its own."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from backend.api.errors import install_error_handlers
from backend.errors import Invalid
from backend.interviews.service import InterviewRefused, WorkerSilent
from backend.populations.placement import NotEnoughCapacity
from backend.populations.store import AgentNotInPopulation, AgentOfNoPopulation, UnknownAgent
from backend.simulations.launch import LaunchRefused
from backend.simulations.store import SimulationActive, UnknownSimulation
from backend.sweeps.store import UnknownSweep
from backend.workers.registry import (
    LeaseSuperseded,
    RemovedWorkerUnchanged,
    UnknownWorker,
    UnregisteredWorker,
    WorkerRemoved,
)
from backend.workers.verify import AddressHeld, RegistrationRefused, WorkerUnreachable

REFUSALS = {
    "simulation": (UnknownSimulation(7), 404, "simulation 7 not found"),
    "sweep": (UnknownSweep(3), 404, "sweep 3 not found"),
    "worker": (UnknownWorker(2), 404, "worker 2 not found"),
    "agent": (UnknownAgent(9), 404, "agent 9 not found"),
    # It keeps the run's own status (a string) in `status`: the HTTP status is another name.
    "active": (SimulationActive(4, "running"), 409, "simulation 4 is running: cancel it first"),
    "launch": (LaunchRefused("population 1 is deploying"), 409, "population 1 is deploying"),
    "capacity": (
        NotEnoughCapacity(10, 4, 2, {}),
        409,
        "size 10 is more than the cluster's free capacity: 4 agents fit on 2 online worker(s)",
    ),
    "interview": (InterviewRefused("not hosted"), 409, "not hosted"),
    "silent": (WorkerSilent("worker a:1 did not answer"), 503, "worker a:1 did not answer"),
    "unregistered": (UnregisteredWorker(5), 404, "unknown worker 5: register again"),
    "superseded": (
        LeaseSuperseded(5),
        409,
        "worker 5 was registered again by another process: register again",
    ),
    "removed": (WorkerRemoved(5), 410, "worker 5 was removed"),
    "drain removed": (
        RemovedWorkerUnchanged(5, "drained"),
        409,
        "worker 5 was removed; it cannot be drained",
    ),
    "refused": (RegistrationRefused("not yours"), 403, "not yours"),
    "held": (AddressHeld("address a:1 is held"), 409, "address a:1 is held"),
    "no population": (
        AgentOfNoPopulation((3 << 32) | 1, 3),
        404,
        f"agent {(3 << 32) | 1} not found (no population 3)",
    ),
    "not a member": (
        AgentNotInPopulation(8, 2),
        404,
        "agent 8 is not in simulation 2's population",
    ),
}


@pytest.fixture
async def client():
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/refuse/{name}")
    async def refuse(name: str):
        raise REFUSALS[name][0]

    @app.get("/invalid")
    async def invalid():
        raise Invalid("agent 1 is in population 1", loc=("body", "simulation_id"))

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://manager") as http:
        yield http


@pytest.mark.parametrize("name", sorted(REFUSALS))
async def test_each_refusal_answers_its_status_and_detail(client, name):
    _, status, detail = REFUSALS[name]
    answer = await client.get(f"/refuse/{name}")
    assert (answer.status_code, answer.json()) == (status, {"detail": detail})


async def test_invalid_input_is_a_422_naming_the_field(client):
    answer = await client.get("/invalid")
    assert answer.status_code == 422
    assert answer.json() == {
        "detail": [
            {
                "loc": ["body", "simulation_id"],
                "msg": "agent 1 is in population 1",
                "type": "value_error",
            }
        ]
    }


async def test_an_unreachable_worker_is_told_when_to_retry(client, monkeypatch):
    monkeypatch.setitem(REFUSALS, "unreachable", (WorkerUnreachable("no route"), 503, "no route"))
    answer = await client.get("/refuse/unreachable")
    assert (answer.status_code, answer.json()) == (503, {"detail": "no route"})
    assert answer.headers["retry-after"] == "2"


async def test_a_refusal_without_headers_sends_no_retry_after(client):
    answer = await client.get("/refuse/silent")
    assert "retry-after" not in answer.headers
