"""Random sequences of lifecycle calls on a real manager and real workers (hypothesis stateful).

Each step is one call an operator could make: deploy or delete a population; launch, pause,
resume, cancel, delete or re-run a simulation; clean, drain or undrain a worker; or let time
pass. After every call:

- no answer is a 5xx, and every status is one the route documents in the OpenAPI;
- every simulation's status moved only along the run's state machine since it was last seen
  (completed and cancelled are final, nothing goes back to pending, a deleted run stays gone);
- counts add up: a run's kept rounds are `current_round` of `rounds`, each over its whole
  population; a deployed population's agents are all placed, a degraded one's are not all
  hosted, and a deleted population hosts nothing (in the store, and on the workers);
- a population has at most one active run.

One manager and one two-process worker node serve the whole module; populations are small and
runs short (the synthetic policy), so a few examples of a dozen steps fit a CI budget.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from tests.support import reset_postgres, running_cluster, wait_for, worker_client
from tests.support_populations import YAML, population_yaml

ACTIVE = {"pending", "running", "paused"}
# Where a run can go from each status, in any number of steps (it is only seen now and then):
# completed and cancelled are final; failed and paused runs resume; nothing returns to pending.
REACHABLE = {
    "pending": {"pending", "running", "paused", "completed", "failed", "cancelled"},
    "running": {"running", "paused", "completed", "failed", "cancelled"},
    "paused": {"running", "paused", "completed", "failed", "cancelled"},
    "failed": {"running", "paused", "completed", "failed", "cancelled"},
    "completed": {"completed"},
    "cancelled": {"cancelled"},
}
POPULATION_REACHABLE = {
    "deploying": {"deploying", "deployed", "degraded", "failed", "deleting", "deleted"},
    "deployed": {"deployed", "degraded", "deleting", "deleted"},
    "degraded": {"deployed", "degraded", "deleting", "deleted"},
    "deleting": {"deleting", "deleted"},
    "deleted": {"deleted"},
    "failed": {"failed", "deleting", "deleted"},
}
# Worker-side checks wait this long for the reaper (every 10 s) to remove strays.
EVENTUALLY_S = 20


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, postgres_server_url):
    """A manager on Postgres (the production store) with one node of two worker processes."""
    tmp = tmp_path_factory.mktemp("lifecycle")
    reset_postgres(postgres_server_url)
    with running_cluster(tmp, postgres_server_url, procs=2) as manager:
        yield manager


def documented_codes(api: httpx.Client) -> dict[tuple[str, str], set[int]]:
    spec = api.get("/api/openapi.json").json()
    return {
        (method.upper(), path): {int(code) for code in operation["responses"]}
        for path, item in spec["paths"].items()
        for method, operation in item.items()
        if method in ("get", "post", "delete", "put", "patch")
    }


class Lifecycle(RuleBasedStateMachine):
    manager = None  # set by the test before the machine runs
    codes: dict[tuple[str, str], set[int]] = {}

    populations = Bundle("populations")
    simulations = Bundle("simulations")

    def __init__(self) -> None:
        super().__init__()
        self.api = self.manager.api()
        self.population_status: dict[int, str] = {}
        self.population_size: dict[int, int] = {}
        self.simulation_status: dict[int, str] = {}
        self.simulation_population: dict[int, int] = {}
        self.deleted_simulations: set[int] = set()
        self.workers = [w["id"] for w in self.manager.workers()]
        self.addresses = {w["id"]: w["address"] for w in self.manager.workers()}

    # --- calls -------------------------------------------------------------------------------

    def call(self, method: str, template: str, path: str, **kwargs) -> httpx.Response:
        resp = self.api.request(method, path, **kwargs)
        where = f"{method} {path} -> {resp.status_code}: {resp.text[:500]}"
        assert resp.status_code < 500, where
        assert resp.status_code in self.codes[(method, template)], f"undocumented: {where}"
        return resp

    # --- populations -------------------------------------------------------------------------

    @initialize(target=populations, sizes=st.lists(st.integers(10, 60), min_size=2, max_size=2))
    def two_populations(self, sizes: list[int]):
        return multiple(*(pid for size in sizes if (pid := self._deploy(size)) is not None))

    @precondition(lambda self: len(self._kept_populations()) < 3)
    @rule(target=populations, size=st.integers(10, 60))
    def deploy(self, size: int):
        pid = self._deploy(size)
        return multiple() if pid is None else pid

    def _deploy(self, size: int) -> int | None:
        resp = self.call(
            "POST",
            "/api/populations",
            "/api/populations",
            content=population_yaml("education", name=f"prop-{size}", size=size),
            headers=YAML,
        )
        if resp.status_code != 202:
            assert resp.status_code == 409, resp.text  # no room (every worker drained)
            return None
        pid = resp.json()["id"]
        self.population_status[pid] = "deploying"
        self.population_size[pid] = size
        final = wait_for(
            lambda: (s := self._population(pid)["status"]) != "deploying" and s,
            60,
            what=f"population {pid} deployed",
        )
        assert final in ("deployed", "degraded"), self._population(pid)
        return pid

    @rule(pid=populations)
    def delete_population(self, pid: int) -> None:
        resp = self.call("DELETE", "/api/populations/{population_id}", f"/api/populations/{pid}")
        assert resp.status_code in (202, 409), resp.text
        if resp.status_code == 409:
            # Only while it plays a run (deploys finish before a step ends).
            active = [
                sid
                for sid, p in self.simulation_population.items()
                if p == pid and self.simulation_status.get(sid) in ACTIVE
            ]
            assert active or self._active_runs(pid), resp.text
            return
        wait_for(
            lambda: self._population(pid)["status"] == "deleted",
            60,
            what=f"population {pid} deleted",
        )

    # --- simulations -------------------------------------------------------------------------

    @rule(
        target=simulations,
        pid=populations,
        rounds=st.integers(1, 8),
        latency=st.sampled_from([0.01, 0.2, 0.5]),
        seed=st.integers(0, 2**31),
    )
    def launch(self, pid: int, rounds: int, latency: float, seed: int):
        config = {
            "population_id": pid,
            "rounds": rounds,
            "policy": {"kind": "synthetic", "latency_s": latency},
            "seed": seed,
        }
        resp = self.call("POST", "/api/simulations", "/api/simulations", json=config)
        if resp.status_code != 202:
            # Refused: its population is deleted, degraded or busy with another run.
            assert resp.status_code in (409, 422), resp.text
            return multiple()
        return self._track(resp.json(), pid)

    @rule(target=simulations, sid=simulations)
    def rerun(self, sid: int):
        template = "/api/simulations/{simulation_id}/rerun"
        resp = self.call("POST", template, f"/api/simulations/{sid}/rerun")
        if resp.status_code != 202:
            return multiple()
        return self._track(resp.json(), self.simulation_population[sid])

    @rule(sid=simulations)
    def pause(self, sid: int) -> None:
        self.call("POST", "/api/simulations/{simulation_id}/pause", f"/api/simulations/{sid}/pause")

    @rule(
        sid=simulations,
        body=st.sampled_from(
            [None, {}, {"allow_partial": True}, {"allow_partial": False}, {"allow_partial": None}]
        ),
    )
    def resume(self, sid: int, body: dict | None) -> None:
        template = "/api/simulations/{simulation_id}/resume"
        kwargs = {} if body is None else {"json": body}
        self.call("POST", template, f"/api/simulations/{sid}/resume", **kwargs)

    @rule(sid=simulations, body=st.sampled_from([None, {}, {"reason": "property test"}]))
    def cancel(self, sid: int, body: dict | None) -> None:
        template = "/api/simulations/{simulation_id}/cancel"
        kwargs = {} if body is None else {"json": body}
        self.call("POST", template, f"/api/simulations/{sid}/cancel", **kwargs)

    @rule(sid=consumes(simulations))
    def delete_simulation(self, sid: int) -> None:
        resp = self.call("DELETE", "/api/simulations/{simulation_id}", f"/api/simulations/{sid}")
        if resp.status_code == 204:
            self.deleted_simulations.add(sid)
        else:
            assert resp.status_code in (404, 409), resp.text

    @rule(
        sid=simulations,
        body=st.sampled_from([None, {}, {"allow_partial": True}]),
        cancel_after=st.booleans(),
    )
    def pause_then_resume(self, sid: int, body: dict | None, cancel_after: bool) -> None:
        """Back to back, as an impatient operator would: pause, resume at once (maybe while
        the run is still stopping), and maybe cancel."""
        self.pause(sid)
        self.resume(sid, body)
        if cancel_after:
            self.cancel(sid, None)

    @rule(sid=simulations)
    def let_it_play(self, sid: int) -> None:
        """Time passes: the run ends, or pauses, or 15 s go by."""
        if sid in self.deleted_simulations:
            return
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            resp = self.api.get(f"/api/simulations/{sid}")
            if resp.status_code != 200 or resp.json()["status"] not in ("pending", "running"):
                return
            time.sleep(0.1)

    # --- workers -----------------------------------------------------------------------------

    @rule(index=st.integers(0, 1), action=st.sampled_from(["clean", "drain", "undrain"]))
    def operate_worker(self, index: int, action: str) -> None:
        """Empty a worker (its agents move to the other), drain it, or undrain it."""
        wid = self.workers[index]
        if action == "clean":
            resp = self.call(
                "DELETE", "/api/workers/{worker_id}/agents", f"/api/workers/{wid}/agents"
            )
            assert resp.status_code in (200, 409), resp.text  # 409: it hosts a playing run
        else:
            template = f"/api/workers/{{worker_id}}/{action}"
            resp = self.call("POST", template, f"/api/workers/{wid}/{action}")
            assert resp.status_code == 200, resp.text

    # --- what must hold after every step -----------------------------------------------------

    @invariant()
    def simulations_move_along_their_state_machine(self) -> None:
        for sid, before in list(self.simulation_status.items()):
            resp = self.call("GET", "/api/simulations/{simulation_id}", f"/api/simulations/{sid}")
            if sid in self.deleted_simulations:
                assert resp.status_code == 404, f"deleted simulation {sid} came back: {resp.text}"
                continue
            assert resp.status_code == 200, resp.text
            run = resp.json()
            now = run["status"]
            assert now in REACHABLE[before], f"simulation {sid}: {before} -> {now}: {run}"
            self.simulation_status[sid] = now
            assert 0 <= run["current_round"] <= run["rounds"], run
            if now == "completed":
                assert run["current_round"] == run["rounds"], run
            if now == "paused":
                assert run["pause_reason"], run
            if now == "failed":
                assert run["error"], run
            rounds = self.call(
                "GET",
                "/api/simulations/{simulation_id}/rounds",
                f"/api/simulations/{sid}/rounds",
            ).json()["items"]
            # A round commits with the run's progress: what is kept is rounds 1..current.
            kept = [r["round"] for r in rounds]
            assert kept[: run["current_round"]] == list(range(1, run["current_round"] + 1)), (
                run,
                kept,
            )
            size = self.population_size[self.simulation_population[sid]]
            for r in rounds:
                answered = r["n_valid"] + r["n_invalid"] + r["n_late"] + r["n_lost"]
                assert answered == size, (sid, r)

    @invariant()
    def a_population_has_at_most_one_active_run(self) -> None:
        for pid in self.population_status:
            assert len(self._active_runs(pid)) <= 1, (pid, self._active_runs(pid))

    @invariant()
    def population_counts_add_up(self) -> None:
        for pid, before in list(self.population_status.items()):
            population = self._population(pid)
            now = population["status"]
            assert now in POPULATION_REACHABLE[before], f"population {pid}: {before} -> {now}"
            self.population_status[pid] = now
            size, hosted = population["size"], population["hosted"]
            placed = sum(population["agents_per_worker"].values())
            assert 0 <= hosted <= size, population
            if now == "deployed":
                assert hosted == size and placed == size, population
            elif now == "degraded":
                assert hosted < size, population
            elif now == "deleted":
                assert hosted == 0 and placed == 0, population
                wait_for(
                    lambda pid=pid: not any(self._on_workers(pid).values()),
                    EVENTUALLY_S,
                    what=f"deleted population {pid} gone from every worker",
                )

    # --- helpers -----------------------------------------------------------------------------

    def _kept_populations(self) -> list[int]:
        return [p for p, status in self.population_status.items() if status != "deleted"]

    def _track(self, simulation: dict, pid: int) -> int:
        sid = simulation["id"]
        assert simulation["status"] in ACTIVE, simulation
        self.simulation_status[sid] = "pending"
        self.simulation_population[sid] = pid
        return sid

    def _population(self, pid: int) -> dict:
        resp = self.call("GET", "/api/populations/{population_id}", f"/api/populations/{pid}")
        assert resp.status_code == 200, resp.text
        return resp.json()

    def _active_runs(self, pid: int) -> list[int]:
        resp = self.call(
            "GET", "/api/simulations", "/api/simulations", params={"population_id": pid}
        )
        return [s["id"] for s in resp.json()["items"] if s["status"] in ACTIVE]

    def _on_workers(self, pid: int) -> dict[str, int]:
        """Agents of the population each live worker process says it hosts (asked directly)."""

        async def ask() -> dict[str, int]:
            hosted = {}
            for address in self.addresses.values():
                async with worker_client(address) as client:
                    info = await client.info(timeout=5)
                hosted[address] = int(info.population_agents.get(str(pid), 0))
            return hosted

        return asyncio.run(ask())

    def teardown(self) -> None:
        """Leave the cluster as the next example expects it: no run, no population, workers
        taking agents."""
        try:
            for sid, status in self.simulation_status.items():
                if sid not in self.deleted_simulations and status in ACTIVE:
                    self.api.post(f"/api/simulations/{sid}/cancel")
            for sid in self.simulation_status:
                if sid not in self.deleted_simulations:
                    wait_for(
                        lambda sid=sid: (
                            self.api.get(f"/api/simulations/{sid}").json()["status"] not in ACTIVE
                        ),
                        30,
                        what=f"simulation {sid} stopped",
                    )
            for pid in self.population_status:
                self.api.delete(f"/api/populations/{pid}")
            for wid in self.workers:
                self.api.post(f"/api/workers/{wid}/undrain")
            for pid in self.population_status:
                wait_for(
                    lambda pid=pid: self._population(pid)["status"] == "deleted",
                    60,
                    what=f"population {pid} deleted",
                )
        finally:
            self.api.close()


def test_random_lifecycles_never_5xx_and_keep_the_invariants(cluster):
    with cluster.api() as api:
        Lifecycle.codes = documented_codes(api)
    Lifecycle.manager = cluster
    run_state_machine_as_test(
        Lifecycle,
        settings=settings(
            max_examples=5,
            stateful_step_count=16,
            deadline=None,
            database=None,
            print_blob=True,
            suppress_health_check=list(HealthCheck),
        ),
    )
