"""Roles and secrets on a real cluster: the viewer token reads every GET route and the websocket
and is refused every other method; the operator token still does everything; and no token ever
shows in the manager's or the workers' logs, nor in the process list."""

from __future__ import annotations

import json
import re
import subprocess

import httpx
import psutil
import pytest
from fastapi.routing import APIRoute
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from backend.app import ROUTERS
from backend.events.socket_auth import auth_subprotocols, events_url
from tests.support import Manager, populace_cmd, stop_process, wait_for
from tests.support_populations import deploy_population, population_text

WORKER_PLANE = re.compile(r"^/api/workers/(register|\{worker_id\}/(heartbeat|deregister))$")
READ_ONLY = "the viewer token is read-only"


def _api_routes() -> list[tuple[str, str]]:
    """(method, path) of every /api route of every router the app includes."""
    routes = []
    for router in ROUTERS:
        for route in router.routes:
            if isinstance(route, APIRoute) and route.path.startswith("/api"):
                routes += [(m, route.path) for m in sorted(route.methods - {"HEAD", "OPTIONS"})]
    return routes


ROUTES = _api_routes()
READS = [(m, p) for m, p in ROUTES if m == "GET"]
WRITES = [(m, p) for m, p in ROUTES if m != "GET"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A manager logging at debug level, and a worker node that read its join token from a
    file (no token on its command line, none in its environment)."""
    tmp = tmp_path_factory.mktemp("roles")
    manager = Manager(
        tmp=tmp,
        database_url=f"sqlite+aiosqlite:///{tmp}/populace.db",
        extra_env={"POPULACE_LOG_LEVEL": "debug"},
    ).start()
    token_file = tmp / "join_token"
    token_file.write_text(manager.join_token + "\n")
    token_file.chmod(0o600)
    secrets = ("POPULACE_API_TOKEN", "POPULACE_JOIN_TOKEN", "POPULACE_VIEWER_TOKEN")
    env = {k: v for k, v in manager.env.items() if k not in secrets}
    worker_log = tmp / "worker.log"
    with open(worker_log, "ab") as log:
        node = subprocess.Popen(
            populace_cmd(
                "worker", "--manager", manager.url, "--procs", "1", "--join-token-file", token_file
            ),
            cwd=tmp,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    manager.worker_node = node
    manager.worker_log = worker_log
    try:
        wait_for(lambda: manager.workers(state="online"), 60, what="the worker online")
        yield manager
    finally:
        stop_process(node)
        manager.stop()


@pytest.fixture(scope="module")
def ids(cluster) -> dict[str, int | str]:
    """Real ids for every path parameter: a deployed population, a played simulation, the
    built-in plugin."""
    with cluster.api() as api:
        pid = deploy_population(api, population_text("roles"))["id"]
        config = {"population_id": pid, "rounds": 1, "policy": {"kind": "level_k"}, "seed": 1}
        resp = api.post("/api/simulations", json=config)
        assert resp.status_code == 202, resp.text
        sid = resp.json()["id"]
        wait_for(
            lambda: api.get(f"/api/simulations/{sid}").json()["status"] == "completed",
            60,
            what="the simulation completed",
        )
        sweep = {
            "name": "roles",
            "populations": [pid],
            "base": {"rounds": 1, "policy": {"kind": "level_k"}},
            "grid": {"seed": [1]},
        }
        resp = api.post("/api/sweeps", json=sweep)
        assert resp.status_code == 202, resp.text
        sweep_id = resp.json()["id"]
        wait_for(
            lambda: api.get(f"/api/sweeps/{sweep_id}").json()["status"] == "completed",
            60,
            what="the sweep completed",
        )
    return {
        "worker_id": cluster.workers()[0]["id"],
        "population_id": pid,
        "agent_id": (pid << 32) | 0,
        "simulation_id": sid,
        "sweep_id": sweep_id,
        "name": "guess",
        "group": 0,  # the guessing game keeps no group metrics: an empty series
    }


# Reads that need a query parameter besides the path's ids.
QUERIES = {"/api/agents/{agent_id}/transcripts": "simulation_id"}


def _fill(path: str, ids: dict[str, int | str]) -> str:
    names = re.findall(r"\{(\w+)\}", path)
    missing = [n for n in names if n not in ids]
    assert not missing, f"{path}: no id for {missing}; add one to the `ids` fixture"
    return path.format(**{n: ids[n] for n in names})


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_route_inventory_covers_reads_and_writes():
    assert len(READS) >= 10 and len(WRITES) >= 10
    assert ("GET", "/api/info") in READS and (
        "DELETE",
        "/api/populations/{population_id}",
    ) in WRITES


@pytest.mark.parametrize("method,path", READS, ids=[f"{m} {p}" for m, p in READS])
def test_viewer_and_operator_read_every_get_route(cluster, ids, method, path):
    url = cluster.url + _fill(path, ids)
    if path in QUERIES:
        url += f"?{QUERIES[path]}={ids[QUERIES[path]]}"
    for token in (cluster.viewer_token, cluster.api_token):
        resp = httpx.request(method, url, headers=_bearer(token), timeout=30)
        assert resp.status_code == 200, (path, resp.text)


@pytest.mark.parametrize("method,path", WRITES, ids=[f"{m} {p}" for m, p in WRITES])
def test_viewer_is_refused_every_other_method(cluster, ids, method, path):
    resp = httpx.request(
        method, cluster.url + _fill(path, ids), headers=_bearer(cluster.viewer_token), json={}
    )
    if WORKER_PLANE.match(path):
        # The worker plane takes the join token only: a viewer token is just a wrong token.
        assert resp.status_code == 401, resp.text
    else:
        assert resp.status_code == 403, resp.text
        assert resp.json() == {"detail": READ_ONLY}


def test_refused_writes_changed_nothing(cluster, ids):
    with cluster.api() as api:
        population = api.get(f"/api/populations/{ids['population_id']}").json()
        worker = api.get(f"/api/workers/{ids['worker_id']}").json()
        simulation = api.get(f"/api/simulations/{ids['simulation_id']}").json()
    assert population["status"] == "deployed" and population["hosted"] == population["size"]
    assert worker["state"] == "online" and worker["agents"] == population["size"]
    assert simulation["status"] == "completed"


@pytest.mark.parametrize(
    "method,path",
    [(m, p) for m, p in WRITES if not WORKER_PLANE.match(p)],
    ids=[f"{m} {p}" for m, p in WRITES if not WORKER_PLANE.match(p)],
)
def test_operator_token_passes_every_write_route(cluster, method, path):
    # Ids nobody has: the route runs past authentication and answers 404 (or 422 for the body).
    missing: dict[str, int | str] = dict.fromkeys(
        ("worker_id", "population_id", "agent_id", "simulation_id", "sweep_id"), 999_999
    )
    missing["name"] = "no-such-upload.csv"
    resp = httpx.request(
        method, cluster.url + _fill(path, missing), headers=_bearer(cluster.api_token), json={}
    )
    assert resp.status_code in (404, 409, 422), resp.text


def test_info_reports_the_callers_role(cluster):
    for token, role in ((cluster.api_token, "operator"), (cluster.viewer_token, "viewer")):
        info = httpx.get(f"{cluster.url}/api/info", headers=_bearer(token)).json()
        assert info["role"] == role


def test_websocket_takes_the_token_in_its_subprotocols_viewer_included(cluster):
    for token in (cluster.api_token, cluster.viewer_token):
        with cluster.events(open_timeout=5, token=token, topics="cluster") as ws:
            # The manager never echoes the auth subprotocol (it carries the token).
            assert ws.subprotocol == "populace.v1"
            assert json.loads(ws.recv(timeout=5))["type"] == "hello"
    url = events_url(cluster.url, topics="cluster")
    for offered in (None, ["populace.v1"], auth_subprotocols(cluster.join_token)):
        with pytest.raises(InvalidStatus) as refused, connect(url, subprotocols=offered):
            pass
        assert refused.value.response.status_code == 403


def test_a_token_in_the_url_is_refused_saying_how_to_authenticate(cluster):
    url = events_url(cluster.url, token=cluster.api_token, topics="cluster")
    # Even with valid subprotocols: a client that still puts the token in URLs must notice.
    for offered in (None, auth_subprotocols(cluster.api_token)):
        with pytest.raises(InvalidStatus) as refused, connect(url, subprotocols=offered):
            pass
        assert refused.value.response.status_code == 403
        detail = json.loads(refused.value.response.body)["detail"]
        assert "Sec-WebSocket-Protocol" in detail and "populace.auth." in detail


def test_no_token_in_any_log_or_command_line(cluster, ids):
    """Last in the module: everything above has been logged by now."""
    # A few more requests of every kind, refused ones included.
    with cluster.events(open_timeout=5, token=cluster.viewer_token, topics="cluster") as ws:
        ws.recv(timeout=5)
    for token in (cluster.api_token, cluster.viewer_token, cluster.join_token):
        with pytest.raises(InvalidStatus):
            connect(events_url(cluster.url, token=token, topics="cluster"))
    httpx.get(f"{cluster.url}/api/workers", headers=_bearer("wrong-" + cluster.api_token))
    httpx.get(f"{cluster.url}/api/workers?token={cluster.api_token}")
    # A heartbeat or two more from the worker, written to the store since these requests.
    beaten = cluster.workers()[0]["last_heartbeat"]
    wait_for(
        lambda: cluster.workers()[0]["last_heartbeat"] > beaten, timeout=30, what="a fresh beat"
    )

    secrets = {
        "API token": cluster.api_token,
        "join token": cluster.join_token,
        "viewer token": cluster.viewer_token,
    }
    for name, value in list(secrets.items()):
        secrets[f"{name} (subprotocol)"] = auth_subprotocols(value)[1].removeprefix("populace.")
    logs = {
        "manager": (cluster.tmp / f"manager-{cluster.port}.log").read_text(errors="replace"),
        "worker": cluster.worker_log.read_text(errors="replace"),
    }
    assert "WebSocket /ws/events" in logs["manager"], "the manager logs handshakes at debug"
    assert "token=[redacted]" in logs["manager"], "the URL-token handshakes were logged, redacted"
    for process, text in logs.items():
        for name, value in secrets.items():
            assert value not in text, f"the {name} is in the {process} log"

    node = psutil.Process(cluster.worker_node.pid)
    processes = [node, *node.children(recursive=True)]
    assert len(processes) >= 2, "the node and its worker process"
    for process in [*processes, psutil.Process(cluster.proc.pid)]:
        command_line = " ".join(process.cmdline())
        for name, value in secrets.items():
            assert value not in command_line, f"the {name} is on a command line: {command_line}"
    # The node hands the join token to its processes in their environment (readable by the
    # user only), read here from the file it was given.
    assert any(p.environ().get("POPULACE_JOIN_TOKEN") == cluster.join_token for p in processes[1:])
