"""A plugin whose own code raises on the workers pauses the run with its error, names the
plugin and its policy, counts no worker as failed, keeps the rounds before, and resumes once
the fault is gone (issue 27: bad input). The plugin is installed the way a user's is: a
distribution with a populace.simulations entry point on the manager's and workers' path."""

from __future__ import annotations

from tests.support import install_plugin_package, wait_for
from tests.support_simulations import deploy, finish, rounds_of, start

PLUGIN = """
from pathlib import Path

import numpy as np
from pydantic import Field

from populace.plugin import (
    Metric, NumberAction, Params, PolicySupport, Resolution, RulePolicy, Simulation, exact_sum,
)


class TrapParams(Params):
    trap: str = Field("", title="Trap file", description="from round 2, raise while it exists")


class Sprung(RulePolicy):
    def decide(self, params, policy, observation):
        if observation.round >= 2 and params.trap and Path(params.trap).exists():
            raise ValueError(f"the trap is set in round {observation.round}")
        return np.full(len(observation.agent_ids), 0.5)


class Trap(Simulation):
    title = "Trap"
    params = TrapParams
    metrics = (Metric("mean", "Mean"),)
    policies = (PolicySupport("sprung", "Sprung", rule=Sprung),)
    default_policy = "sprung"

    def action(self, params):
        return NumberAction(0.0, 1.0)

    def resolve(self, params, actions):
        valid = actions.values[actions.valid]
        return Resolution({"mean": exact_sum(valid) / len(valid) if len(valid) else None})
"""


def test_a_plugin_that_raises_on_the_workers_pauses_the_run_until_fixed(manager_factory, tmp_path):
    path = install_plugin_package(tmp_path / "site", "trap_plugin", PLUGIN, "trap", "Trap")
    trap = tmp_path / "trap"
    manager = manager_factory(extra_env={"PYTHONPATH": str(path)}).start()
    manager.start_workers(procs=2)
    wait_for(lambda: len([w for w in manager.workers() if w["state"] == "online"]) == 2, 30)
    pid = deploy(manager, size=100)
    with manager.api() as api:
        body = {"population_id": pid, "rounds": 3, "plugin": {"name": "trap", "params": {}}}
        body["plugin"]["params"]["trap"] = str(trap)
        trap.write_text("set")
        sid = start(api, body)["id"]
        paused = wait_for(
            lambda: (s := api.get(f"/api/simulations/{sid}").json())["status"] == "paused" and s,
            60,
            what="the run paused",
        )
        reason = paused["pause_reason"]
        assert "plugin 'trap' policy 'sprung' failed" in reason, reason
        assert "ValueError: the trap is set in round" in reason, reason
        kept = rounds_of(api, sid)
        assert [(r["round"], r["metrics"]["mean"]) for r in kept] == [(1, 0.5)]
        # Not the workers' fault: both are still online and host the population.
        assert len([w for w in manager.workers() if w["state"] == "online"]) == 2
        timeline = api.get(f"/api/simulations/{sid}/timeline").json()["items"]
        assert any("ValueError: the trap is set" in str(entry) for entry in timeline)

        trap.unlink()  # fixed
        assert api.post(f"/api/simulations/{sid}/resume").status_code == 200
        done = finish(api, sid, timeout=60)
        assert done["status"] == "completed", done
        assert [r["round"] for r in rounds_of(api, sid)] == [1, 2, 3]
