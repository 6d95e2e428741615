"""TLS on both planes, turned on with the certificates `populace certs init` makes: the manager
serves HTTPS only, workers serve gRPC over TLS only, and a whole run goes through."""

from __future__ import annotations

import subprocess

import grpc
import httpx
import pytest

from tests.support import populace_cmd, wait_for, worker_metadata
from tests.support_simulations import deploy, finish, level_k, start
from worker_server.rpc import worker_pb2, worker_pb2_grpc


@pytest.fixture
def certs(tmp_path):
    directory = tmp_path / "certs"
    done = subprocess.run(
        populace_cmd("certs", "init", "--dir", str(directory), "--host", "127.0.0.1"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "--tls-cert" in done.stdout
    for key in ("ca-key.pem", "manager-key.pem", "worker-key.pem"):
        assert (directory / key).stat().st_mode & 0o077 == 0, f"{key} is readable by others"
    # A second init would overwrite the CA under running clusters: refused without --force.
    again = subprocess.run(
        populace_cmd("certs", "init", "--dir", str(directory)), capture_output=True, text=True
    )
    assert again.returncode != 0 and "--force" in again.stderr
    return directory


def test_a_run_over_tls_on_both_planes(manager_factory, postgres_url, certs):
    manager = manager_factory(
        database_url=postgres_url,
        extra_env={
            "POPULACE_TLS_CERT": str(certs / "manager.pem"),
            "POPULACE_TLS_KEY": str(certs / "manager-key.pem"),
            "POPULACE_TLS_CA": str(certs / "ca.pem"),
        },
    ).start()
    assert manager.url.startswith("https://")
    manager.start_workers(
        procs=2,
        env={
            "POPULACE_TLS_CERT": str(certs / "worker.pem"),
            "POPULACE_TLS_KEY": str(certs / "worker-key.pem"),
        },
    )
    workers = wait_for(
        lambda: (ws := manager.workers(state="online")) and len(ws) == 2 and ws,
        timeout=30,
        what="two TLS workers online",
    )
    assert all(w["tls"] for w in workers)

    pid = deploy(manager, size=300)
    with manager.api() as api:
        simulation = start(api, level_k(pid, rounds=2))
        assert finish(api, simulation["id"])["status"] == "completed"
        # The peer plane too: a network simulation's values go worker to worker over TLS.
        resp = api.post(
            "/api/populations",
            json={
                "name": "tls-network",
                "size": 400,
                "seed": 3,
                "distributions": [{"name": "g", "categories": [{"name": "a", "weight": 1}]}],
                "graph": {"kind": "erdos_renyi", "mean_degree": 6},
                "placement": {"spread": "even"},
            },
        )
        assert resp.status_code == 202, resp.text
        network = resp.json()["id"]
        wait_for(
            lambda: api.get(f"/api/populations/{network}").json()["status"] == "deployed",
            60,
            what="the network population deployed",
        )
        epidemic = start(
            api,
            {
                "population_id": network,
                "rounds": 100,
                "plugin": {"name": "sir", "params": {"transmission": 0.4, "initial_infected": 4}},
            },
        )
        done = finish(api, epidemic["id"])
        assert done["status"] == "completed", done
        sent = [
            r["network_bytes"]
            for r in api.get(f"/api/simulations/{done['id']}/rounds").json()["items"]
        ]
        assert sent[0] > 0, sent

    # Plain HTTP to the manager, or a client that does not trust the CA, gets nowhere.
    with pytest.raises(httpx.HTTPError):
        httpx.get(manager.url.replace("https", "http") + "/healthz", timeout=5)
    with pytest.raises(httpx.ConnectError):
        httpx.get(manager.url + "/healthz", timeout=5)
    # A plaintext gRPC call to a worker fails, even with the right secret.
    with (
        grpc.insecure_channel(workers[0]["address"]) as channel,
        pytest.raises(grpc.RpcError) as refused,
    ):
        worker_pb2_grpc.WorkerServiceStub(channel).GetInfo(
            worker_pb2.GetInfoRequest(), metadata=worker_metadata(), timeout=5
        )
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    # Over TLS with the cluster's CA and the secret, it answers.
    credentials = grpc.ssl_channel_credentials((certs / "ca.pem").read_bytes())
    with grpc.secure_channel(workers[0]["address"], credentials) as channel:
        info = worker_pb2_grpc.WorkerServiceStub(channel).GetInfo(
            worker_pb2.GetInfoRequest(), metadata=worker_metadata(), timeout=5
        )
    assert info.worker_id == workers[0]["id"]

    # The CLI trusts the manager through POPULACE_TLS_CA.
    listed = subprocess.run(
        populace_cmd("population", "list", "--manager", manager.url),
        env={**manager.env, "POPULACE_TLS_CA": str(certs / "ca.pem")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    assert "players" in listed.stdout
