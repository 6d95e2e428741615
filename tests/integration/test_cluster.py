"""The walking skeleton end to end: real manager, real worker processes, real gRPC."""

from __future__ import annotations

import json
import os
import signal

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support import descendants, pid_alive, stop_process, wait_for, worker_metadata
from worker_server.rpc import worker_pb2, worker_pb2_grpc


def _online(manager, n):
    workers = [w for w in manager.workers() if w["state"] == "online"]
    return workers if len(workers) == n else None


def test_two_workers_register_serve_grpc_and_push_events(manager):
    with manager.events(open_timeout=5, topics="cluster") as ws:
        hello = json.loads(ws.recv(timeout=5))
        assert hello["type"] == "hello"
        manager.start_workers(procs=2)
        workers = wait_for(lambda: _online(manager, 2), timeout=30, what="two workers online")
        ids = {w["id"] for w in workers}
        # Each registration is a worker.updated; their beats come in workers.updated batches.
        events, registered, beaten = [], set(), set()
        while registered != ids or beaten != ids:
            event = json.loads(ws.recv(timeout=10))
            if event["type"] == "ping":  # keep-alives (no seq) come on a slow machine
                continue
            events.append(event)
            payload = event["payload"]
            if events[-1]["type"] == "worker.updated":
                registered.add(payload["worker"]["id"])
            else:
                beaten |= {w["id"] for w in payload["workers"]}

    assert len({w["pid"] for w in workers}) == 2, "each process registers on its own"
    for worker in workers:
        with grpc.insecure_channel(worker["address"]) as channel:
            health = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=5
            )
            assert health.status == health_pb2.HealthCheckResponse.SERVING
            info = worker_pb2_grpc.WorkerServiceStub(channel).GetInfo(
                worker_pb2.GetInfoRequest(), timeout=5, metadata=worker_metadata()
            )
        assert (info.pid, info.worker_id, info.address) == (
            worker["pid"],
            worker["id"],
            worker["address"],
        )
        assert info.rss_bytes > 0 and info.capacity > 0

    seqs = [e["seq"] for e in events]
    assert seqs == list(range(hello["seq"] + 1, hello["seq"] + 1 + len(events))), "no gaps"
    assert all(e["topic"] == "cluster" for e in events)
    assert {e["type"] for e in events} == {"worker.updated", "workers.updated"}
    assert all(w["rss_bytes"] > 0 for e in events[2:] for w in e["payload"].get("workers", []))

    # Heartbeats carry live stats.
    first = {w["id"]: w["last_heartbeat"] for w in workers}
    wait_for(
        lambda: all(
            w["last_heartbeat"] > first[w["id"]] and w["rss_bytes"] > 0 for w in _online(manager, 2)
        ),
        timeout=10,
        what="fresh heartbeats with stats",
    )


def test_sigkilled_worker_turns_offline_within_ttl(manager):
    doomed = manager.start_workers(procs=1, start_new_session=True)
    manager.start_workers(procs=1)
    wait_for(lambda: _online(manager, 2), timeout=30, what="two workers online")
    victim = next(w for w in manager.workers() if w["pid"] in descendants(doomed.pid))

    os.killpg(doomed.pid, signal.SIGKILL)  # supervisor and child die without a word
    # How fast is a benchmark figure (`populace bench liveness`), not a timed test; this only
    # bounds the wait so a manager that never notices fails.
    wait_for(
        lambda: manager.api().get(f"/api/workers/{victim['id']}").json()["state"] == "offline",
        timeout=30,
        what="the killed worker offline",
    )
    survivors = [w for w in manager.workers() if w["state"] == "online"]
    assert len(survivors) == 1 and survivors[0]["id"] != victim["id"]


def test_workers_reregister_after_manager_restart_on_a_fresh_database(manager_factory, tmp_path):
    first = manager_factory(database_url=f"sqlite+aiosqlite:///{tmp_path}/one.db").start()
    first.start_workers(procs=2)
    before = {
        w["pid"]: w["id"] for w in wait_for(lambda: _online(first, 2), timeout=30, what="online")
    }
    first.stop()

    # Same address and tokens, empty store: heartbeats get 404 and the workers register again.
    second = manager_factory(
        database_url=f"sqlite+aiosqlite:///{tmp_path}/two.db",
        port=first.port,
        api_token=first.api_token,
        join_token=first.join_token,
    ).start()
    after = wait_for(lambda: _online(second, 2), timeout=30, what="workers re-registered")
    assert {w["pid"] for w in after} == set(before), "the same processes came back, no restart"
    # The new store hands out ids 1 and 2 again; a process still beating with its old id must
    # not keep someone else's row alive: each process holds exactly its own row. Wait until
    # every new row has been beaten since it was registered (a row kept only by another
    # process's old id would never be, and would go offline).
    registered = {w["id"]: w["last_heartbeat"] for w in after}
    wait_for(
        lambda: (
            (ws := _online(second, 2))
            and all(w["id"] in registered and w["last_heartbeat"] > registered[w["id"]] for w in ws)
        ),
        timeout=30,
        what="a beat on each re-registered row",
    )
    final = _online(second, 2)
    assert final is not None and len({w["id"] for w in final}) == 2
    assert {w["pid"] for w in final} == set(before)


def test_workers_come_back_online_after_manager_restart_on_the_same_database(manager_factory):
    first = manager_factory().start()
    # A witness that dies with the first manager: the next manager's sweep marking it offline
    # shows the sweep has run past every deadline (startup grace and TTL) it holds.
    witness = first.start_workers(procs=1, start_new_session=True)
    first.start_workers(procs=1)
    wait_for(lambda: _online(first, 2), timeout=30, what="online")
    (dead,) = [w for w in first.workers() if w["pid"] in descendants(witness.pid)]
    (worker,) = [w for w in first.workers() if w["id"] != dead["id"]]
    first.stop()
    os.killpg(witness.pid, signal.SIGKILL)
    second = manager_factory(
        port=first.port, api_token=first.api_token, join_token=first.join_token
    ).start()
    with second.api() as api:
        wait_for(
            lambda: api.get(f"/api/workers/{dead['id']}").json()["state"] == "offline",
            timeout=60,
            what="the next manager's sweep marking the dead worker offline",
        )
    # The sweep has run, and did not lose the worker that lived on: the same row, online.
    (again,) = wait_for(lambda: _online(second, 1), timeout=30, what="online again")
    assert again["id"] == worker["id"] and again["pid"] == worker["pid"]


def test_wrong_join_token_worker_exits_nonzero_with_the_reason(manager):
    proc = manager.start_workers(procs=1, join_token="not-the-join-token")
    code = proc.wait(timeout=30)
    log = open(proc.log_path).read()
    assert code != 0
    assert "join token" in log and "401" in log, log
    assert manager.workers() == []


def test_sigterm_deregisters_and_leaves_no_process(manager):
    node = manager.start_workers(procs=2)
    workers = wait_for(lambda: _online(manager, 2), timeout=30, what="online")
    pids = [node.pid, *descendants(node.pid)]
    assert {w["pid"] for w in workers} <= set(pids)

    assert stop_process(node, signal.SIGTERM, timeout=15) == 0
    wait_for(
        lambda: not any(pid_alive(p) for p in pids), timeout=10, what="all worker processes gone"
    )
    assert manager.workers() == []
    removed = manager.workers(state="removed")
    assert sorted(w["id"] for w in removed) == sorted(w["id"] for w in workers)


def test_killing_the_supervisor_leaves_no_orphans(manager):
    node = manager.start_workers(procs=2)
    wait_for(lambda: _online(manager, 2), timeout=30, what="online")
    children = descendants(node.pid)
    assert len(children) >= 2
    node.kill()
    node.wait()
    wait_for(lambda: not any(pid_alive(p) for p in children), timeout=10, what="children to notice")


def test_removed_worker_shuts_itself_down(manager):
    node = manager.start_workers(procs=1)
    (worker,) = wait_for(lambda: _online(manager, 1), timeout=30, what="online")
    with manager.api() as api:
        assert api.delete(f"/api/workers/{worker['id']}").status_code == 204
        assert api.get(f"/api/workers/{worker['id']}").json()["state"] == "removed"
    assert node.wait(timeout=15) == 0
    assert not pid_alive(worker["pid"])


def test_drain_is_kept_across_heartbeats_and_can_be_undone(manager):
    manager.start_workers(procs=1)
    (worker,) = wait_for(lambda: _online(manager, 1), timeout=30, what="online")
    url = f"/api/workers/{worker['id']}"
    with manager.api() as api:

        def beats_after(change: dict) -> dict:
            """The worker once it beat again after `change` (stored times sort as strings)."""
            return wait_for(
                lambda: (
                    (w := api.get(url).json())["last_heartbeat"] > change["last_heartbeat"] and w
                ),
                timeout=10,
                what="a heartbeat after the change",
            )

        drained = api.post(f"{url}/drain").json()
        assert drained["state"] == "draining"
        assert beats_after(drained)["state"] == "draining"
        undrained = api.post(f"{url}/undrain")
        assert undrained.status_code == 200 and undrained.json()["state"] == "online"
        assert beats_after(undrained.json())["state"] == "online"
        assert api.post("/api/workers/987654/undrain").status_code == 404
        assert api.delete(url).status_code == 204
        resp = api.post(f"{url}/undrain")
        assert resp.status_code == 409 and "removed" in resp.json()["detail"]


def test_worker_plane_bad_input(shared_manager):
    m = shared_manager
    join = {"Authorization": f"Bearer {m.join_token}"}
    good = {
        "node": "n",
        "address": "127.0.0.1:5000",
        "pid": 42,
        "capacity": 10,
        "version": "t",
        "rpc_secret": "s" * 32,
    }
    with httpx.Client(base_url=m.url, headers=join, timeout=10) as c:
        for field, value in [
            ("pid", -1),
            ("address", "no-port"),
            ("capacity", "many"),
            ("node", ""),
            ("rpc_secret", "short"),
            ("rpc_secret", "has spaces in it, which headers mangle"),
            ("tls", "maybe"),
        ]:
            resp = c.post("/api/workers/register", json={**good, field: value})
            assert resp.status_code == 422
            assert resp.json()["detail"][0]["loc"] == ["body", field], resp.text
        missing = c.post(
            "/api/workers/register", json={k: v for k, v in good.items() if k != "pid"}
        )
        assert missing.status_code == 422 and missing.json()["detail"][0]["loc"] == ["body", "pid"]
        unknown_key = c.post("/api/workers/register", json={**good, "colour": "red"})
        assert unknown_key.status_code == 422 and "colour" in unknown_key.json()["detail"][0]["loc"]

        beat = {"agents": 0, "capacity": 1, "cpu_percent": 0, "rss_bytes": 1, "lease": "x"}
        resp = c.post("/api/workers/987654/heartbeat", json=beat)
        assert resp.status_code == 404 and "register again" in resp.json()["detail"]
    with m.api() as api:
        assert api.get("/api/workers/987654").status_code == 404
        assert api.post("/api/workers/987654/drain").status_code == 404
        assert api.get("/api/workers", params={"limit": 0}).status_code == 422
        assert api.get("/api/workers", params={"state": "sleepy"}).status_code == 422
