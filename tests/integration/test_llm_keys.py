"""LLM API keys stay on the workers, end to end: a real manager and a real worker node whose
environment and keys file hold the keys and whose POPULACE_LLM_ALLOWED_HOSTS bounds where
requests go, real gRPC, and real OpenAI-compatible servers (bench.openai_server) that require
the key over real HTTP."""

from __future__ import annotations

import uuid

import grpc
import numpy as np
import pytest

from backend.rounds.fanout import RoundFailed, run_round
from backend.workers.grpc_client import AgentColumns
from bench.openai_server import OpenAIServer, rate_fault
from tests.support import Manager, stop_process, wait_for, worker_client
from tests.support_simulations import deploy, finish, rounds_of, start
from worker_server.rpc import worker_pb2 as pb

MODEL = "keyed-model"
NODE = "keyed-node"
ENV_KEY = "sk-env-" + uuid.uuid4().hex
FILE_KEY = "sk-file-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A manager and one worker node: ENV_KEY in the worker's environment only (not the
    manager's), FILE_KEY in its keys file, and only 127.0.0.1 allowed as an LLM host."""
    tmp = tmp_path_factory.mktemp("llm-keys")
    keys = tmp / "llm-keys.env"
    keys.write_text(f"# keys of this node\nFILE_KEY={FILE_KEY}\n")
    keys.chmod(0o600)
    manager = Manager(tmp=tmp, database_url=f"sqlite+aiosqlite:///{tmp}/populace.db").start()
    node = manager.start_workers(
        procs=1,
        node=NODE,
        env={
            "ENV_KEY": ENV_KEY,
            "POPULACE_LLM_ALLOWED_HOSTS": "127.0.0.1",
            "POPULACE_LLM_KEYS_FILE": str(keys),
        },
    )
    try:
        wait_for(lambda: len(manager.workers(state="online")) == 1, 30, what="the worker online")
        yield manager
    finally:
        stop_process(node)
        manager.stop()


def _llm(pid: int, *endpoints: dict, rounds: int = 2) -> dict:
    return {
        "population_id": pid,
        "rounds": rounds,
        "prompt": {"system": "plain", "user": "basic"},
        "policy": {"kind": "llm", "endpoints": list(endpoints), "max_retries": 1},
        "deadlines": {"agent_s": 10},
        "seed": 5,
    }


def _endpoint(base_url: str, **fields) -> dict:
    return {"base_url": base_url, "model": MODEL, "max_concurrency": 8, **fields}


def _address(manager: Manager) -> str:
    (worker,) = manager.workers(state="online")
    return worker["address"]


def test_keys_come_from_the_worker_and_reach_the_llm_servers_as_bearer_tokens(cluster):
    pid = deploy(cluster, size=30, name="keyed")
    with (
        OpenAIServer(model=MODEL, api_key=ENV_KEY) as by_env,
        OpenAIServer(model=MODEL, api_key=FILE_KEY) as by_file,
        cluster.api() as api,
    ):
        config = _llm(
            pid,
            _endpoint(by_env.base_url, api_key_env="ENV_KEY"),
            _endpoint(by_file.base_url + "/v1", api_key_env="FILE_KEY"),
        )
        sid = start(api, config)["id"]
        done = finish(api, sid, timeout=120)
        assert done["status"] == "completed", done
        assert [r["n_valid"] for r in rounds_of(api, sid)] == [30, 30]
        # Every request (the probe's too) carried the right key, and none was refused.
        assert set(by_env.authorizations) == {f"Bearer {ENV_KEY}"}
        assert set(by_file.authorizations) == {f"Bearer {FILE_KEY}"}
        assert (
            "401" not in by_env.stats()["by_status"] and "401" not in by_file.stats()["by_status"]
        )
        served = by_env.stats()["by_path"].get("/v1/chat/completions", 0) + by_file.stats()[
            "by_path"
        ].get("/v1/chat/completions", 0)
        assert served == 60
        stored = api.get(f"/api/simulations/{sid}").text
        assert '"api_key_env":"ENV_KEY"' in stored.replace(" ", "")
        assert ENV_KEY not in stored and FILE_KEY not in stored
    logs = [cluster.log(), *(log.read_text() for log in cluster.tmp.glob("worker-*.log"))]
    assert not any(ENV_KEY in text or FILE_KEY in text for text in logs)


def test_launches_the_workers_would_refuse_are_422_naming_the_field_and_the_reason(cluster):
    pid = deploy(cluster, size=10, name="refused")
    with OpenAIServer(model=MODEL) as server, cluster.api() as api:
        # A key in the config: refused before anything else, and not echoed.
        keyed = api.post(
            "/api/simulations",
            json=_llm(pid, _endpoint(server.base_url, api_key="sk-do-not-echo-me")),
        )
        assert keyed.status_code == 422, keyed.text
        (error,) = keyed.json()["detail"]
        assert error["loc"] == ["body", "policy", "llm", "endpoints", 0, "api_key"]
        assert "api_key_env" in error["msg"] and "sk-do-not-echo-me" not in keyed.text

        # A host outside the worker's allow-list (localhost is not 127.0.0.1 to it).
        elsewhere = f"http://localhost:{server.port}"
        refused = api.post("/api/simulations", json=_llm(pid, _endpoint(elsewhere)))
        assert refused.status_code == 422, refused.text
        (error,) = refused.json()["detail"]
        assert error["loc"] == ["body", "policy", "llm", "endpoints", 0, "base_url"]
        assert f"host localhost:{server.port} is not allowed" in error["msg"]
        assert "POPULACE_LLM_ALLOWED_HOSTS" in error["msg"] and NODE in error["msg"]

        # A variable the worker does not have.
        missing = api.post(
            "/api/simulations",
            json=_llm(pid, _endpoint(server.base_url, api_key_env="NOT_ON_THE_WORKER")),
        )
        assert missing.status_code == 422, missing.text
        (error,) = missing.json()["detail"]
        assert error["loc"] == ["body", "policy", "llm", "endpoints", 0, "api_key_env"]
        assert "NOT_ON_THE_WORKER is not set on worker node" in error["msg"]
        assert NODE in error["msg"]

        assert api.get("/api/simulations", params={"population_id": pid}).json()["items"] == []
        assert server.requests == 0 and server.authorizations == {}


async def _population(client, n: int) -> AgentColumns:
    ids = np.arange(1, n + 1, dtype=np.int64)
    population = AgentColumns(
        population_id=f"keys-{uuid.uuid4().hex[:8]}",
        ids=ids,
        codes={},
        categories={},
        personas=[f"agent-{i}" for i in ids.tolist()],
    )
    await client.create_agents(population)
    return population


def _round(population: AgentColumns, endpoint: pb.LlmEndpoint) -> pb.RunRoundRequest:
    llm = pb.LlmPolicy(
        endpoints=[endpoint],
        default_model=MODEL,
        user_template="You are {persona}. Round {round}.",
        api="chat",
        answer_mode="basic",
        request_timeout_s=10,
    )
    return pb.RunRoundRequest(
        round_id=uuid.uuid4().hex,
        population_id=population.population_id,
        round=1,
        rule=pb.GameRule(ratio=2 / 3, offset=0, min=0, max=100),
        policy=pb.Policy(llm=llm),
        seed=1,
    )


def _personas(endpoint: pb.LlmEndpoint) -> pb.GeneratePersonasRequest:
    return pb.GeneratePersonasRequest(
        endpoints=[endpoint],
        model=MODEL,
        metaprompt="Describe a {occupation}.",
        fallback_template="You are a {occupation}.",
        attributes=[pb.AttributeColumn(name="occupation", categories=["x"], codes=[0, 0])],
        count=2,
    )


async def test_the_worker_refuses_other_hosts_and_missing_variables_on_every_llm_call(cluster):
    async with worker_client(_address(cluster)) as client:
        with OpenAIServer(model=MODEL, api_key=ENV_KEY) as server:
            population = await _population(client, 5)
            elsewhere = pb.LlmEndpoint(
                base_url=f"http://localhost:{server.port}", model=MODEL, api_key_env="ENV_KEY"
            )
            missing = pb.LlmEndpoint(
                base_url=server.base_url, model=MODEL, api_key_env="NOT_ON_THE_WORKER"
            )

            # A host outside the allow-list: INVALID_ARGUMENT in RunRound, ProbeLlm and
            # GeneratePersonas, naming the host and the setting.
            with pytest.raises(RoundFailed, match="INVALID_ARGUMENT") as err:
                await run_round([client], _round(population, elsewhere))
            assert f"host localhost:{server.port} is not allowed" in str(err.value)
            assert "POPULACE_LLM_ALLOWED_HOSTS" in str(err.value)
            for call in (
                client.probe_llm([elsewhere], timeout_s=3),
                client.generate_personas(_personas(elsewhere), timeout=10),
            ):
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await call
                assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert "POPULACE_LLM_ALLOWED_HOSTS" in err.value.details()

            # A variable the worker does not have: INVALID_ARGUMENT for RunRound and
            # GeneratePersonas, a failed probe; each names the variable and the node.
            with pytest.raises(RoundFailed, match="INVALID_ARGUMENT") as err:
                await run_round([client], _round(population, missing))
            assert f"NOT_ON_THE_WORKER is not set on worker node '{NODE}'" in str(err.value)
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await client.generate_personas(_personas(missing), timeout=10)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "NOT_ON_THE_WORKER" in err.value.details()
            (status,) = (await client.probe_llm([missing], timeout_s=3)).endpoints
            assert not status.ok and f"NOT_ON_THE_WORKER is not set on worker node '{NODE}'" in (
                status.error
            )
            assert server.requests == 0 and server.authorizations == {}

            # The allowed host with the worker's key plays, the key sent as a bearer token.
            keyed = pb.LlmEndpoint(base_url=server.base_url, model=MODEL, api_key_env="ENV_KEY")
            result = await run_round([client], _round(population, keyed))
            assert sum(a.count for a in result.partials.values()) == 5
            assert server.authorizations == {f"Bearer {ENV_KEY}": 5}
            await client.delete_agents(all=True)


def test_a_keyed_run_resumes_after_a_manager_restart_with_nothing_given(cluster):
    """Nothing about keys lives in the manager, so a restarted one resumes the run as is."""
    pid = deploy(cluster, size=20, name="restarted")
    with (
        OpenAIServer(model=MODEL, api_key=ENV_KEY, fault=rate_fault(fail_rate=1.0)) as server,
        cluster.api() as api,
    ):
        sid = start(api, _llm(pid, _endpoint(server.base_url, api_key_env="ENV_KEY")))["id"]
        wait_for(
            lambda: api.get(f"/api/simulations/{sid}").json()["status"] == "paused",
            60,
            what="the run paused (the endpoint fails every request)",
        )
    with OpenAIServer(model=MODEL, api_key=ENV_KEY, port=server.port) as server:
        cluster.stop()
        cluster.start()
        wait_for(lambda: len(cluster.workers(state="online")) == 1, 60, what="the worker back")
        with cluster.api() as api:
            resumed = api.post(f"/api/simulations/{sid}/resume")
            assert resumed.status_code == 200, resumed.text
            done = finish(api, sid, timeout=120)
            assert done["status"] == "completed", done
            assert [r["n_valid"] for r in rounds_of(api, sid)] == [20, 20]
            assert set(server.authorizations) == {f"Bearer {ENV_KEY}"}
            refused = api.post(f"/api/simulations/{sid}/resume", json={"api_keys": {"x": "y"}})
            assert refused.status_code == 422 and "takes no API keys" in refused.text
