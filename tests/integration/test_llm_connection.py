"""POST /api/llm/test (the launch form's "Test connection"): a real worker hosting the population
probes each endpoint, a real OpenAI-compatible server (bench/openai_server.py) answers."""

from __future__ import annotations

import pytest

from bench.openai_server import OpenAIServer
from tests.support import free_port, running_cluster
from tests.support_simulations import deploy

MODEL = "test-model"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("llm-connection")
    with running_cluster(tmp, f"sqlite+aiosqlite:///{tmp}/populace.db") as manager:
        yield manager


def test_each_endpoint_is_probed_from_a_worker_hosting_the_population(cluster):
    pid = deploy(cluster, size=20)
    dead = f"http://127.0.0.1:{free_port()}"
    with OpenAIServer(model=MODEL) as server, cluster.api() as api:
        resp = api.post(
            "/api/llm/test",
            json={
                "population_id": pid,
                "endpoints": [
                    {"base_url": server.base_url, "model": MODEL, "server": "openai"},
                    {"base_url": dead, "model": MODEL},
                    {"base_url": f"{server.base_url}/v1", "model": "not-served"},
                ],
            },
        )
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert body["worker"] in {w["address"] for w in cluster.workers()}
        live, gone, wrong = body["endpoints"]
        assert live["ok"] is True and MODEL in live["models"] and live["error"] is None, live
        assert live["base_url"] == server.base_url
        assert gone["ok"] is False and gone["base_url"] == dead and gone["error"], gone
        # Reachable; whether it serves the model is the form's to say (llama.cpp takes any name).
        assert wrong["base_url"] == server.base_url and wrong["models"] == [MODEL], wrong


def test_bad_bodies_name_the_field_and_an_unhosted_population_is_a_conflict(cluster):
    with cluster.api() as api:
        bad = api.post(
            "/api/llm/test",
            json={"population_id": 1, "endpoints": [{"base_url": "ftp://x", "model": "m"}]},
        )
        assert bad.status_code == 422
        assert bad.json()["detail"][0]["loc"] == ["body", "endpoints", 0, "base_url"]
        empty = api.post("/api/llm/test", json={"population_id": 1, "endpoints": []})
        assert empty.status_code == 422 and empty.json()["detail"][0]["loc"][:2] == [
            "body",
            "endpoints",
        ]
        nobody = api.post(
            "/api/llm/test",
            json={"population_id": 999999, "endpoints": [{"base_url": "http://a:1", "model": "m"}]},
        )
        assert nobody.status_code == 409 and "no live worker hosts it" in nobody.json()["detail"]
