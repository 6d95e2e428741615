"""A plugin whose policy is slow on the workers: the round deadline holds as for the runtime's
own policies (issue 27: bad input). Its agents that are not decided when the round's deadline
passes count as late, the round is kept with them, no worker is counted failed, and the run
plays on. The plugin is installed the way a user's is (a distribution with an entry point)."""

from __future__ import annotations

from tests.support import install_plugin_package, wait_for
from tests.support_simulations import deploy, finish, rounds_of, start

PLUGIN = """
import time

import numpy as np
from pydantic import Field

from populace.plugin import (
    Metric, NumberAction, Params, PolicySupport, Resolution, RulePolicy, Simulation, exact_sum,
)


class SlowParams(Params):
    pause_s: float = Field(0.0, ge=0, le=60, title="Pause", description="in round 2, per cohort")


class Dawdle(RulePolicy):
    def decide(self, params, policy, observation):
        if observation.round == 2:
            time.sleep(params.pause_s)  # a plugin's own slow code, holding its thread
        return np.full(len(observation.agent_ids), 0.5)


class Slow(Simulation):
    title = "Slow"
    params = SlowParams
    metrics = (Metric("mean", "Mean"),)
    policies = (PolicySupport("dawdle", "Dawdle", rule=Dawdle),)
    default_policy = "dawdle"

    def action(self, params):
        return NumberAction(0.0, 1.0)

    def resolve(self, params, actions):
        valid = actions.values[actions.valid]
        return Resolution({"mean": exact_sum(valid) / len(valid) if len(valid) else None})
"""


def test_a_slow_plugin_policy_is_cut_by_the_round_deadline(manager_factory, tmp_path):
    path = install_plugin_package(tmp_path / "site", "slow_plugin", PLUGIN, "slow", "Slow")
    manager = manager_factory(extra_env={"PYTHONPATH": str(path)}).start()
    manager.start_workers(procs=2)
    wait_for(lambda: len([w for w in manager.workers() if w["state"] == "online"]) == 2, 30)
    n = 100
    pid = deploy(manager, size=n)
    with manager.api() as api:
        body = {
            "population_id": pid,
            "rounds": 3,
            "plugin": {"name": "slow", "params": {"pause_s": 6}},
            "deadlines": {"round_s": 1.5},
        }
        sid = start(api, body)["id"]
        done = finish(api, sid, timeout=120)
        assert done["status"] == "completed", done
        played = rounds_of(api, sid)
    assert [r["round"] for r in played] == [1, 2, 3]
    first, second, third = played
    assert first["n_valid"] == n and third["n_valid"] == n
    # Round 2: every cohort slept past the deadline, so its agents are late, not lost or failed.
    assert second["n_late"] == n and second["n_valid"] == 0, second
    assert len([w for w in manager.workers() if w["state"] == "online"]) == 2
