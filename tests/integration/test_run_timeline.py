"""Run timelines, alerts and JSON logs on a real manager and real workers, with a real local HTTP
server standing in for Slack's webhook: a cancel's reason on the timeline, a failed run and a
SIGKILLed node alerting, and no process logging the webhook URL or a token."""

from __future__ import annotations

import json
import os
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.support import free_port, pid_alive, wait_for
from tests.support_simulations import deploy, finish, rounds_running, start

SECRET_PATH = "/services/T0001/B0001/hook-secret-xyz"


class Webhook:
    """A real HTTP server collecting what is posted to it."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        received = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                received.append({"path": self.path, **json.loads(self.rfile.read(length).decode())})
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{SECRET_PATH}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def texts(self) -> list[str]:
        return [b["text"] for b in list(self.bodies)]


@pytest.fixture
def webhook():
    hook = Webhook()
    hook.thread.start()
    yield hook
    hook.server.shutdown()


@pytest.fixture
def cluster(manager_factory, webhook):
    manager = manager_factory(
        extra_env={"POPULACE_ALERT_WEBHOOK_URL": webhook.url, "POPULACE_LOG_FORMAT": "json"}
    ).start()
    manager.start_workers(procs=2)
    wait_for(
        lambda: len([w for w in manager.workers() if w["state"] == "online"]) == 2,
        30,
        what="two workers online",
    )
    return manager


def _timeline(api, sid: int, **params) -> list[dict]:
    items, after = [], None
    while True:
        resp = api.get(
            f"/api/simulations/{sid}/timeline",
            params={**params, **({"after": after} if after is not None else {})},
        )
        assert resp.status_code == 200, resp.text
        page = resp.json()
        items += page["items"]
        after = page["next_after"]
        if after is None:
            return items


def _logs(manager, pattern: str) -> str:
    return "".join(p.read_text(errors="replace") for p in manager.tmp.glob(pattern))


def test_a_cancelled_run_shows_launch_rounds_and_the_reason_on_its_timeline(cluster, webhook):
    pid = deploy(cluster)
    with cluster.api() as api:
        config = {"population_id": pid, "rounds": 200, "seed": 1}
        sid = start(api, {**config, "policy": {"kind": "synthetic", "latency_s": 0.05}})["id"]
        wait_for(
            lambda: api.get(f"/api/simulations/{sid}").json()["current_round"] >= 3,
            60,
            what="three rounds played",
        )
        cancel = api.post(f"/api/simulations/{sid}/cancel", json={"reason": "wrong prompt"})
        assert cancel.status_code == 200, cancel.text
        done = finish(api, sid, timeout=60)
        assert done["status"] == "cancelled", done
        entries = wait_for(
            lambda: (e := _timeline(api, sid, limit=2))[-1]["kind"] == "cancelled" and e,
            30,
            what="the cancel on the timeline",
        )
        kinds = [e["kind"] for e in entries]
        assert kinds[:2] == ["launched", "started"], kinds
        rounds = [e for e in entries if e["kind"] == "round"]
        assert [e["round"] for e in rounds] == list(range(1, done["current_round"] + 1))
        assert all("mean" in e["message"] and e["data"]["duration_s"] >= 0 for e in rounds)
        assert entries[-1]["message"] == "cancelled: wrong prompt"
        assert entries[-1]["data"]["reason"] == "wrong prompt"
        assert [e["id"] for e in entries] == sorted(e["id"] for e in entries)
        # One page at a time: the same entries, whatever the page size.
        assert _timeline(api, sid, limit=1000) == entries

        assert api.get("/api/simulations/999999/timeline").status_code == 404
        bad = api.get(f"/api/simulations/{sid}/timeline", params={"limit": 0})
        assert bad.status_code == 422 and "limit" in bad.text
        assert api.delete(f"/api/simulations/{sid}").status_code == 204
        assert api.get(f"/api/simulations/{sid}/timeline").status_code == 404
    # A cancel alerts nobody; the logs are JSON from every process, without the webhook URL.
    assert not any(f"simulation {sid}" in t for t in webhook.texts())
    manager_log = _logs(cluster, "manager-*.log").splitlines()
    manager_lines = [json.loads(x) for x in manager_log if x.startswith("{")]
    assert manager_lines and {"manager"} == {line["role"] for line in manager_lines}
    # Besides the JSON lines, only the CLI's own banner (stdout, not a log line).
    assert all(x.startswith("populace") for x in manager_log if not x.startswith("{"))
    worker_lines = [
        json.loads(x) for x in _logs(cluster, "worker-*.log").splitlines() if x.startswith("{")
    ]
    assert {"worker[0]", "worker[1]"} <= {line["role"] for line in worker_lines}
    everything = _logs(cluster, "*.log")
    assert "hook-secret-xyz" not in everything and cluster.api_token not in everything


def test_a_failed_run_and_a_sigkilled_node_alert_the_webhook(cluster, webhook):
    pid = deploy(cluster, size=50)
    dead = f"http://127.0.0.1:{free_port()}"
    with cluster.api() as api:
        llm = {"kind": "llm", "endpoints": [{"base_url": dead, "model": "m"}]}
        sid = start(api, {"population_id": pid, "rounds": 2, "policy": llm, "seed": 3})["id"]
        done = finish(api, sid, timeout=60)
        assert done["status"] == "failed", done
        alert = wait_for(
            lambda: next(
                (b for b in webhook.bodies if f"simulation {sid} failed" in b["text"]), None
            ),
            30,
            what="the failed-run alert",
        )
        assert alert["path"] == SECRET_PATH and dead in alert["text"]
        assert {"type": "mrkdwn", "text": f"*simulation*\n{sid}"} in alert["blocks"][1]["fields"]
        kinds = [e["kind"] for e in _timeline(api, sid)]
        assert kinds == ["launched", "started", "failed"], kinds

    # A node killed outright (supervisor and processes): its workers miss their heartbeats.
    node = cluster.start_workers(procs=1, node="doomed", start_new_session=True)
    doomed = wait_for(
        lambda: [w for w in cluster.workers() if w["node"] == "doomed" and w["state"] == "online"],
        30,
        what="the doomed node online",
    )[0]
    os.killpg(node.pid, signal.SIGKILL)
    offline = wait_for(
        lambda: next((b for b in webhook.bodies if f"worker {doomed['id']} at" in b["text"]), None),
        30,
        what="the offline alert",
    )
    assert "offline" in offline["text"] and doomed["address"] in offline["text"]
    everything = _logs(cluster, "*.log")
    assert "hook-secret-xyz" not in everything


def test_a_worker_lost_mid_round_is_a_fault_on_the_timeline(cluster, webhook):
    pid = deploy(cluster)
    workers = [w for w in cluster.workers() if w["state"] == "online"]
    with cluster.api() as api:
        config = {"population_id": pid, "rounds": 4, "seed": 1}
        sid = start(api, {**config, "policy": {"kind": "synthetic", "latency_s": 0.5}})["id"]
        wait_for(
            lambda: rounds_running([w["address"] for w in workers]) == 2,
            30,
            what="both workers in a round",
        )
        victim = workers[0]
        os.kill(victim["pid"], signal.SIGKILL)
        wait_for(lambda: not pid_alive(victim["pid"]), 10, what="worker gone")
        done = finish(api, sid, timeout=120)
        assert done["status"] == "completed", done
        entries = wait_for(
            lambda: (e := _timeline(api, sid))[-1]["kind"] == "completed" and e,
            30,
            what="the end on the timeline",
        )
    faults = [e for e in entries if e["kind"] == "fault"]
    assert faults and any(f"worker {victim['address']} failed" in e["message"] for e in faults)
    assert all(e["message"].startswith(f"round {e['round']}: ") for e in faults)
    assert [e["round"] for e in entries if e["kind"] == "round"] == [1, 2, 3, 4]
    assert entries[-1]["message"] == "finished after 4 rounds"
    # A fault the run rode out alerts nobody (the process came back before the TTL or not, the
    # run did not fail or pause).
    assert not any(f"simulation {sid}" in t for t in webhook.texts())
