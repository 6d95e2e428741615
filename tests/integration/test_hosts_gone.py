"""Rounds whose hosts go away, on real worker processes: every host SIGKILLed and kept down
past the recovery window pauses the run with a reason that says what to do, and a resume after
the workers are back finishes it with the same export; a worker wrongly called offline
mid-round (frozen past its TTL, then thawed) costs the round only the agents it had not
answered yet."""

from __future__ import annotations

import re
import signal

from tests.support import wait_for
from tests.support_faults import FAST, kill_node, online_workers, start_node
from tests.support_simulations import (
    EventLog,
    deploy,
    export,
    finish,
    rounds_of,
    start,
)


def _status(api, sid: int) -> dict:
    return api.get(f"/api/simulations/{sid}").json()


def _timeline(api, sid: int) -> list[dict]:
    resp = api.get(f"/api/simulations/{sid}/timeline", params={"limit": 200})
    assert resp.status_code == 200, resp.text
    return resp.json()["items"]


def test_every_host_killed_past_the_recovery_window_pauses_and_resume_exports_the_same_bytes(
    manager_factory,
):
    # Longer than the worker TTL: when the window ends, no worker is live any more.
    manager = manager_factory(extra_env={**FAST, "POPULACE_ROUND_RECOVERY_S": "6"}).start()
    nodes = {name: start_node(manager, name, procs=1) for name in ("node-a", "node-b")}
    pid = deploy(manager, size=1000)
    # Rounds of 0.5 s: the kill lands with rounds left to play.
    config = {
        "population_id": pid,
        "rounds": 4,
        "policy": {"kind": "synthetic", "latency_s": 0.5},
        "seed": 31,
    }
    events = EventLog(manager, "simulation:*")
    try:
        with manager.api() as api:
            sid = start(api, config)["id"]
            wait_for(lambda: _status(api, sid)["current_round"] >= 1, 30, what="a round kept")
            kept = _status(api, sid)["current_round"]
            wait_for(
                lambda: any(
                    e["payload"]["simulation_id"] == sid and e["payload"]["round"] > kept
                    for e in events.of("round.progress")
                ),
                30,
                what="a round in flight",
            )
            for proc in nodes.values():
                kill_node(proc)
                proc.wait(10)

            paused = wait_for(
                lambda: (s := _status(api, sid))["status"] in ("paused", "failed") and s,
                60,
                what="the run to stop",
            )
            assert paused["status"] == "paused", paused
            reason = paused["pause_reason"]
            assert "1000 of 1000 agents are not hosted by a live worker" in reason, reason
            assert f"population {pid}" in reason and "no live worker hosts any" in reason
            assert "start the workers again" in reason and "resume" in reason, reason
            assert paused["error"] is None
            assert all(r["n_valid"] == 1000 for r in rounds_of(api, paused["id"]))

            # The same nodes come back (their identities get their rows and agents again).
            for name in nodes:
                nodes[name] = start_node(manager, name, procs=1)
            wait_for(
                lambda: api.get(f"/api/populations/{pid}").json()["hosted"] == 1000,
                60,
                what="the population hosted again",
            )
            resumed = api.post(f"/api/simulations/{sid}/resume", json={})
            assert resumed.status_code == 200, resumed.text
            done = finish(api, sid)
            assert done["status"] == "completed", done
            played = rounds_of(api, sid)
            assert [r["round"] for r in played] == [1, 2, 3, 4]
            assert all(r["n_valid"] == 1000 and r["n_lost"] == 0 for r in played)
            disturbed = export(api, sid, "csv")

            again = start(api, config)["id"]
            assert finish(api, again)["status"] == "completed"
            assert export(api, again, "csv") == disturbed
    finally:
        events.close()


def test_a_worker_wrongly_called_offline_mid_round_keeps_the_decisions_it_already_sent(
    manager_factory,
):
    manager = manager_factory(extra_env=dict(FAST)).start()
    # 100 agents at a time, 0.5 s each: a round of 1,000 agents streams its decisions over 5 s.
    node = start_node(manager, "node-a", procs=1, POPULACE_MAX_CONCURRENCY="100")
    (worker,) = online_workers(manager, "node-a")
    pid = deploy(manager, size=1000)
    config = {
        "population_id": pid,
        "rounds": 3,
        "policy": {"kind": "synthetic", "latency_s": 0.5},
        "seed": 77,
    }
    events = EventLog(manager, "simulation:*")
    try:
        with manager.api() as api:
            sid = start(api, config)["id"]
            wait_for(lambda: _status(api, sid)["current_round"] >= 1, 60, what="a round kept")

            def answered_in_round_2() -> int:
                return max(
                    (
                        e["payload"]["answered"]
                        for e in events.of("round.progress")
                        if e["payload"]["simulation_id"] == sid and e["payload"]["round"] == 2
                    ),
                    default=0,
                )

            wait_for(lambda: answered_in_round_2() >= 200, 30, what="round 2 half answered")
            kill_node(node, signal.SIGSTOP)
            frozen_at = answered_in_round_2()
            try:
                wait_for(
                    lambda: api.get(f"/api/workers/{worker['id']}").json()["state"] == "offline",
                    30,
                    what="the frozen worker called offline",
                )
                # Frozen until the round has given up on its stream.
                wait_for(
                    lambda: any(
                        "went offline during round 2" in e["payload"]["message"]
                        for e in events.of("simulation.fault")
                    ),
                    30,
                    what="round 2 to give up on the frozen worker",
                )
            finally:
                kill_node(node, signal.SIGCONT)

            done = finish(api, sid)
            assert done["status"] == "completed", done
            played = rounds_of(api, sid)
            assert all(r["n_valid"] == 1000 and r["n_lost"] == 0 for r in played), played

            # Only the agents without a decision were asked again (the `only` of the retry).
            retried = [
                int(m.group(1))
                for entry in _timeline(api, sid)
                if (m := re.search(r"round 2: (\d+) agents unanswered", entry["message"]))
            ]
            assert retried, _timeline(api, sid)
            assert retried[0] <= 1000 - frozen_at, (retried, frozen_at)
            disturbed = export(api, sid, "csv")

            again = start(api, config)["id"]
            assert finish(api, again)["status"] == "completed"
            assert export(api, again, "csv") == disturbed
    finally:
        events.close()
