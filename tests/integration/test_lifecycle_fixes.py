"""The smaller lifecycle answers, on a real manager and workers: a removed worker's logs are
gone (410, not "try again"), a deleted population hosts nothing, a config body must say it is
JSON or YAML, and a run resumed by a restarted manager says so on its timeline."""

from __future__ import annotations

import signal

import pytest

from tests.support import running_cluster, wait_for
from tests.support_populations import population_yaml
from tests.support_simulations import deploy, finish

VALID_YAML = population_yaml("education", name="media", size=10)
VALID_JSON = (
    '{"name": "media", "size": 10, "distributions": [{"name": "education", "categories": '
    '[{"name": "a", "weight": 1}]}], "persona": {"mode": "template", "template": "{education}"}}'
)
CONFIG_ROUTES = [
    "/api/populations/validate",
    "/api/populations",
    "/api/simulations",
    "/api/simulations/estimate",
    "/api/sweeps",
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lifecycle-fixes")
    with running_cluster(tmp, f"sqlite+aiosqlite:///{tmp}/populace.db", procs=1) as manager:
        yield manager


def test_a_removed_workers_logs_are_gone_for_good(cluster):
    node = cluster.start_workers(procs=1, node="to-remove")
    try:
        (worker,) = wait_for(
            lambda: (
                [
                    w
                    for w in cluster.workers()
                    if w["node"] == "to-remove" and w["state"] == "online"
                ]
                or None
            ),
            30,
            what="the worker online",
        )
        with cluster.api() as api:
            assert api.get(f"/api/workers/{worker['id']}/logs").status_code == 200
            assert api.delete(f"/api/workers/{worker['id']}").status_code == 204
            gone = api.get(f"/api/workers/{worker['id']}/logs")
        # Not a 503 "try again shortly": a removed worker never serves under this id again.
        assert gone.status_code == 410, gone.text
        detail = gone.json()["detail"]
        assert f"worker {worker['id']} was removed" in detail and "log" in detail
    finally:
        node.wait(30)  # told it was removed (410 on its heartbeat), the node exits


def test_a_deleted_population_hosts_nothing(cluster):
    pid = deploy(cluster, size=40, name="to-delete")
    with cluster.api() as api:
        assert api.get(f"/api/populations/{pid}").json()["hosted"] == 40
        assert api.delete(f"/api/populations/{pid}").status_code == 202
        deleted = wait_for(
            lambda: (p := api.get(f"/api/populations/{pid}").json())["status"] == "deleted" and p,
            30,
            what="deleted",
        )
        assert deleted["hosted"] == 0, deleted
        listed = api.get("/api/populations", params={"include_deleted": True}).json()["items"]
        assert [p["hosted"] for p in listed if p["id"] == pid] == [0]


@pytest.mark.parametrize("path", CONFIG_ROUTES)
@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/octet-stream",
        None,
    ],
)
def test_a_config_body_that_is_not_json_or_yaml_is_a_415(cluster, path, content_type):
    headers = {"Content-Type": content_type} if content_type else {}
    with cluster.api() as api:
        before = len(api.get("/api/populations").json()["items"])
        resp = api.post(path, content=VALID_YAML, headers=headers)
        assert resp.status_code == 415, resp.text
        detail = resp.json()["detail"]
        assert "application/json" in detail and "application/yaml" in detail
        assert len(api.get("/api/populations").json()["items"]) == before  # nothing deployed


@pytest.mark.parametrize(
    "content_type,body",
    [
        ("application/yaml", VALID_YAML),
        ("application/x-yaml", VALID_YAML),
        ("text/yaml; charset=utf-8", VALID_YAML),
        ("application/json", VALID_JSON),
        ("application/json; charset=UTF-8", VALID_JSON),
    ],
)
def test_json_and_yaml_media_types_are_read(cluster, content_type, body):
    with cluster.api() as api:
        resp = api.post(
            "/api/populations/validate", content=body, headers={"Content-Type": content_type}
        )
    assert resp.status_code == 200, resp.text


def test_a_run_resumed_by_a_restarted_manager_says_so_on_its_timeline(cluster):
    pid = deploy(cluster, size=20, name="restart")
    config = {
        "population_id": pid,
        "rounds": 30,
        "policy": {"kind": "synthetic", "latency_s": 0.2},
        "seed": 3,
    }
    with cluster.api() as api:
        resp = api.post("/api/simulations", json=config)
        assert resp.status_code == 202, resp.text
        sid = resp.json()["id"]
        wait_for(
            lambda: api.get(f"/api/simulations/{sid}").json()["current_round"] >= 2,
            60,
            what="two rounds kept",
        )
    cluster.stop(signal.SIGKILL)  # the run stays `running` in the store
    cluster.start()
    with cluster.api() as api:
        done = finish(api, sid, timeout=120)
        assert done["status"] == "completed", done
        items = api.get(f"/api/simulations/{sid}/timeline").json()["items"]
    restarts = [e for e in items if e["message"].startswith("manager restarted")]
    assert len(restarts) == 1, [e["message"] for e in items]
    (entry,) = restarts
    kept = entry["round"]
    assert kept >= 2 and entry["kind"] == "resumed"
    assert entry["message"] == f"manager restarted, resumed from round {kept + 1}"
    assert entry["data"] == {"cause": "manager restart", "from_round": kept + 1}
    # It sits between the rounds kept before the restart (a SIGKILL may cut the timeline's
    # write of the last one) and those played after it, which all follow.
    at = items.index(entry)
    assert all(e["round"] <= kept for e in items[:at] if e["kind"] == "round")
    assert [e["round"] for e in items[at:] if e["kind"] == "round"] == list(range(kept + 1, 31))
