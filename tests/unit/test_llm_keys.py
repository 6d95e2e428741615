"""LLM API keys stay on the workers: a config names the worker's variable (api_key_env) and is
refused when it carries a key; nothing the manager sends holds one; the worker resolves the name
from its keys file or environment, refuses hosts outside its allow-list, and says clearly (never
with the value) when a variable is missing."""

from __future__ import annotations

import asyncio
import json
import types

import numpy as np
import pytest
from pydantic import ValidationError

from backend.populations.config import PersonaConfig
from backend.simulations.config import SimulationConfig
from backend.simulations.environment import GlobalEnvironment
from backend.simulations.service import NotResumable, check_resumable
from backend.simulations.spec import game_spec
from bench.openai_server import OpenAIServer
from worker_server.agents import AgentStore, decode_batch
from worker_server.llm import LlmClient
from worker_server.llm.access import (
    AllowedHost,
    HostNotAllowed,
    LlmAccess,
    MissingLlmKey,
    parse_allowed_hosts,
)
from worker_server.llm.probe import probe
from worker_server.llm.spec import InvalidLlmRequest, endpoint_specs
from worker_server.node import child_env
from worker_server.rounds import AgentSlots, InvalidRound, PartialAggregate, SubEnvironment
from worker_server.rounds.wire import round_spec
from worker_server.rpc import worker_pb2 as pb
from worker_server.settings import WorkerSettings

MODEL = "test-model"
KEY = "sk-unit-0123456789abcdef"


def env(**values: str):
    return values.get


def endpoint(base_url: str = "http://127.0.0.1:9", **fields) -> pb.LlmEndpoint:
    return pb.LlmEndpoint(base_url=base_url, model=MODEL, **fields)


# -- the manager: configs name a variable, never hold a key ------------------------------------


def _config(**endpoint_fields) -> dict:
    return {
        "population_id": 1,
        "rounds": 2,
        "policy": {
            "kind": "llm",
            "endpoints": [
                {"base_url": "https://api.openai.com/v1", "model": MODEL, **endpoint_fields}
            ],
        },
    }


def test_a_config_with_an_api_key_is_refused_without_echoing_it():
    with pytest.raises(ValidationError) as err:
        SimulationConfig.model_validate(_config(api_key=KEY))
    (error,) = err.value.errors()
    assert error["loc"] == ("policy", "llm", "endpoints", 0, "api_key")
    assert "api_key_env" in error["msg"] and "on every worker" in error["msg"]
    assert error["input"] is None and KEY not in str(err.value)
    # Configs stored before api_key_env hold "api_key": null for keyless endpoints.
    assert (
        SimulationConfig.model_validate(_config(api_key=None)).policy.endpoints[0].api_key_env
        is None
    )


@pytest.mark.parametrize(
    "name,message",
    [
        ("1PASSWORD", "not an environment variable name"),
        ("OPENAI-KEY", "not an environment variable name"),
        ("A" * 129, "at most 128"),
        ("POPULACE_JOIN_TOKEN", "the worker's own settings"),
        ("populace_rpc_secret", "the worker's own settings"),
    ],
)
def test_api_key_env_must_name_a_variable_that_is_not_a_worker_setting(name, message):
    with pytest.raises(ValidationError) as err:
        SimulationConfig.model_validate(_config(api_key_env=name))
    assert err.value.errors()[0]["loc"] == ("policy", "llm", "endpoints", 0, "api_key_env")
    assert message in str(err.value)
    with pytest.raises(ValidationError):
        PersonaConfig.model_validate({"template": "t", "mode": "template", "api_key_env": name})


def test_the_round_request_on_the_wire_holds_the_variables_name_and_no_key(monkeypatch):
    # Even when the manager's own environment has the variable, only its name travels.
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    config = SimulationConfig.model_validate(_config(api_key_env="OPENAI_API_KEY"))
    assert config.stored()["policy"]["endpoints"][0]["api_key_env"] == "OPENAI_API_KEY"
    assert KEY not in str(config.stored())

    async def hosts() -> list[str]:
        return []

    env_ = GlobalEnvironment(game_spec(config, 7, seed=3), hosts, population_size=10)
    request = env_.request(1)
    wire = request.SerializeToString()
    assert KEY.encode() not in wire and b"OPENAI_API_KEY" in wire
    (sent,) = request.policy.llm.endpoints
    assert sent.api_key_env == "OPENAI_API_KEY"
    # The field that carried keys is gone for good (reserved, never reused).
    assert "api_key" not in pb.LlmEndpoint.DESCRIPTOR.fields_by_name
    assert pb.LlmEndpoint.DESCRIPTOR.fields_by_name["api_key_env"].number != 4
    assert all(f.number != 4 for f in pb.LlmEndpoint.DESCRIPTOR.fields)


def test_a_run_stored_with_a_redacted_key_is_not_resumable_and_says_why():
    stored = types.SimpleNamespace(id=4, config=_config(api_key="***"))
    with pytest.raises(NotResumable) as err:
        check_resumable(stored)
    assert "simulation 4" in str(err.value) and "api_key_env" in str(err.value)
    fine = types.SimpleNamespace(id=5, config=_config(api_key_env="OPENAI_API_KEY"))
    assert check_resumable(fine).policy.endpoints[0].api_key_env == "OPENAI_API_KEY"


# -- the worker: allowed hosts ------------------------------------------------------------------


def test_allowed_hosts_parse_names_ports_and_ipv6():
    assert parse_allowed_hosts(" gpu-1, GPU-2:8000 ,[::1]:8081, 10.0.0.5 ,, fe80::1 ") == (
        AllowedHost("gpu-1", None),
        AllowedHost("gpu-2", 8000),
        AllowedHost("::1", 8081),
        AllowedHost("10.0.0.5", None),
        AllowedHost("fe80::1", None),
    )
    assert parse_allowed_hosts("") == ()
    for bad in ("gpu:0", "gpu:http", "http://gpu", "[::1", "user@gpu", "gpu:99999"):
        with pytest.raises(ValueError, match="gpu|::1"):
            parse_allowed_hosts(bad)


def test_a_host_outside_the_allow_list_is_refused_naming_the_host_and_the_setting():
    access = LlmAccess(node="n1", allowed_hosts=parse_allowed_hosts("gpu-1, api.openai.com:443"))
    allowed = [
        endpoint("http://gpu-1:8000"),
        endpoint("http://GPU-1/v1"),
        endpoint("https://api.openai.com/v1"),
    ]
    assert len(endpoint_specs(allowed, access=access)) == 3
    for url, shown in [
        ("http://gpu-2:8000", "gpu-2:8000"),
        ("http://api.openai.com", "api.openai.com:80"),  # only 443 is allowed
        ("http://[::1]:8000", "[::1]:8000"),
    ]:
        with pytest.raises(HostNotAllowed) as err:
            endpoint_specs([endpoint(url)], "llm.endpoints", access)
        text = str(err.value)
        assert text.startswith("llm.endpoints[0].base_url: host ") and shown in text
        assert "POPULACE_LLM_ALLOWED_HOSTS" in text and "'n1'" in text
    # The default allows any host.
    assert endpoint_specs([endpoint("http://anything.example:1")])


# -- the worker: keys by name -------------------------------------------------------------------


def test_keys_come_from_the_environment_and_never_show_in_a_repr():
    access = LlmAccess(node="n1", environ=env(OPENAI_API_KEY=KEY))
    (spec,) = endpoint_specs([endpoint(api_key_env="OPENAI_API_KEY")], access=access)
    assert spec.api_key == KEY and spec.api_key_env == "OPENAI_API_KEY"
    assert KEY not in repr(spec)
    (keyless,) = endpoint_specs([endpoint()], access=access)
    assert keyless.api_key == ""


def test_the_keys_file_comes_before_the_environment(tmp_path):
    keys = tmp_path / "llm-keys"
    keys.write_text(
        "# LLM keys\n\nFILE_KEY = \"sk-file\"\nSHARED=sk-shared-from-file\nQUOTED='a=b'\n"
    )
    access = LlmAccess(
        node="n1", keys_file=keys, environ=env(SHARED="sk-shared-from-env", ENV_ONLY="sk-env")
    )
    specs = endpoint_specs(
        [endpoint(api_key_env=n) for n in ("FILE_KEY", "SHARED", "QUOTED", "ENV_ONLY")],
        access=access,
    )
    assert [s.api_key for s in specs] == ["sk-file", "sk-shared-from-file", "a=b", "sk-env"]
    # Read at every request: a rotated key is used from the next one on.
    keys.write_text("FILE_KEY=sk-rotated\n")
    assert endpoint_specs([endpoint(api_key_env="FILE_KEY")], access=access)[0].api_key == (
        "sk-rotated"
    )


def test_a_missing_variable_is_a_clear_error_naming_it_and_the_node(tmp_path):
    access = LlmAccess(node="gpu-node-3", environ=env(EMPTY="", OTHER=KEY))
    with pytest.raises(MissingLlmKey) as err:
        endpoint_specs([endpoint(api_key_env="OPENAI_API_KEY")], "llm.endpoints", access)
    text = str(err.value)
    assert text.startswith("llm.endpoints[0].api_key_env: the API key variable OPENAI_API_KEY")
    assert "is not set on worker node 'gpu-node-3'" in text and KEY not in text
    with pytest.raises(MissingLlmKey, match="EMPTY is empty"):
        endpoint_specs([endpoint(api_key_env="EMPTY")], access=access)
    with pytest.raises(InvalidLlmRequest, match="the worker's own settings"):
        endpoint_specs([endpoint(api_key_env="POPULACE_JOIN_TOKEN")], access=access)
    with pytest.raises(InvalidLlmRequest, match="line break"):
        endpoint_specs(
            [endpoint(api_key_env="BROKEN")],
            access=LlmAccess(environ=env(BROKEN="sk-a\r\nX-Evil: 1")),
        )

    keys = tmp_path / "keys"
    keys.write_text(f"GOOD=x\nthis line is {KEY}\n")
    with pytest.raises(MissingLlmKey) as err:
        endpoint_specs([endpoint(api_key_env="GOOD")], access=LlmAccess(keys_file=keys))
    assert "line 2" in str(err.value) and KEY not in str(err.value)
    keys.unlink()
    with pytest.raises(MissingLlmKey, match="cannot read its llm_keys_file"):
        endpoint_specs([endpoint(api_key_env="GOOD")], access=LlmAccess(keys_file=keys))

    # A probe reports it per endpoint instead (nothing is sent for that endpoint).
    (spec,) = endpoint_specs(
        [endpoint(api_key_env="OPENAI_API_KEY")], access=access, missing_keys_ok=True
    )
    assert spec.api_key == "" and "OPENAI_API_KEY is not set" in spec.key_problem


def test_round_specs_refuse_missing_keys_and_hosts_as_invalid_rounds():
    def round_request(base_url: str, **fields) -> pb.RunRoundRequest:
        llm = pb.LlmPolicy(
            endpoints=[endpoint(base_url, **fields)],
            default_model=MODEL,
            user_template="Round {round}",
            api="chat",
            answer_mode="basic",
        )
        return pb.RunRoundRequest(
            round_id="r",
            population_id="p",
            round=1,
            policy=pb.Policy(llm=llm),
            rule=pb.GameRule(ratio=0.5, min=0, max=100),
        )

    client = LlmClient(access=LlmAccess(node="n", allowed_hosts=parse_allowed_hosts("127.0.0.1")))
    with pytest.raises(InvalidRound, match="NOPE is not set on worker node 'n'"):
        round_spec(round_request("http://127.0.0.1:9", api_key_env="NOPE"), client)
    with pytest.raises(InvalidRound, match=r"host localhost:9 .*POPULACE_LLM_ALLOWED_HOSTS"):
        round_spec(round_request("http://localhost:9"), client)


# -- the key reaches the LLM server (real HTTP) --------------------------------------------------


def _store(n: int) -> AgentStore:
    store = AgentStore(1000)
    batch = pb.AgentBatch(
        population_id="p", agent_ids=list(range(n)), personas=[f"agent-{i}" for i in range(n)]
    )
    with store.upload() as upload:
        upload.add(decode_batch(batch, 0))
        upload.commit()
    return store


async def test_the_workers_key_goes_to_the_llm_server_as_a_bearer_token():
    with OpenAIServer(model=MODEL, api_key=KEY, answer=lambda r: "42") as server:
        client = LlmClient(access=LlmAccess(node="n", environ=env(LLM_KEY=KEY)))
        llm = pb.LlmPolicy(
            endpoints=[endpoint(server.base_url, api_key_env="LLM_KEY")],
            default_model=MODEL,
            user_template="You are {persona}. Round {round}.",
            api="chat",
            answer_mode="basic",
            request_timeout_s=10,
        )
        request = pb.RunRoundRequest(
            round_id="r1", population_id="p", round=1, policy=pb.Policy(llm=llm), seed=1,
            rule=pb.GameRule(ratio=2 / 3, offset=0, min=0, max=100),
        )  # fmt: skip
        try:
            subenv = SubEnvironment(_store(20), AgentSlots(64))
            values, aggregate = [], None
            async for out in subenv.run(round_spec(request, client)):
                if isinstance(out, PartialAggregate):
                    aggregate = out
                else:
                    values.extend(out.values.tolist())
            assert aggregate.count == 20 and np.allclose(values, 42.0)
            assert server.authorizations == {f"Bearer {KEY}": 20}

            # A worker without the right key: the server refuses, and the error shows no key.
            wrong = LlmClient(access=LlmAccess(environ=env(LLM_KEY="sk-wrong-0123456789")))
            statuses = await probe(wrong, endpoint_specs(llm.endpoints, access=wrong.access), 5)
            assert not statuses[0].ok and "HTTP 401" in statuses[0].error
            assert "sk-wrong" not in statuses[0].error
            await wrong.aclose()
        finally:
            await client.aclose()


async def test_a_check_only_probe_sends_nothing_and_fails_an_endpoint_without_its_key():
    with OpenAIServer(model=MODEL) as server:
        access = LlmAccess(node="n9", environ=env(HAVE="sk-x"))
        client = LlmClient(access=access)
        specs = endpoint_specs(
            [
                endpoint(server.base_url, api_key_env="HAVE"),
                endpoint(server.base_url, api_key_env="LACK"),
            ],
            access=access,
            missing_keys_ok=True,
        )
        for check_only in (True, False):
            ok, missing = await probe(client, specs, 5, check_only=check_only)
            assert ok.ok and not missing.ok
            assert "LACK is not set on worker node 'n9'" in missing.error
        assert server.authorizations == {"Bearer sk-x": 1}, "only the full probe of the keyed one"
        await client.aclose()


# -- worker settings ------------------------------------------------------------------------------


def test_worker_settings_take_the_allow_list_and_keys_file_and_hand_them_to_children(
    tmp_path, monkeypatch
):
    for name in ("LLM_ALLOWED_HOSTS", "LLM_KEYS_FILE", "NODE"):
        monkeypatch.delenv(f"POPULACE_{name}", raising=False)
    keys = tmp_path / "keys"
    keys.write_text("OPENAI_API_KEY=sk-x\n")
    monkeypatch.setenv("POPULACE_LLM_ALLOWED_HOSTS", " GPU-1:8000, api.openai.com ")
    monkeypatch.setenv("POPULACE_LLM_KEYS_FILE", str(keys))
    settings = WorkerSettings(join_token="t", node="n1")
    assert settings.llm_allowed_hosts == "gpu-1:8000,api.openai.com"
    assert settings.llm_keys_file == keys
    access = LlmAccess.from_settings(settings)
    assert access.node == "n1" and access.keys_file == keys
    assert access.allowed_hosts == (AllowedHost("gpu-1", 8000), AllowedHost("api.openai.com", None))

    child = child_env(settings, port=7001, base_env={})
    assert child["POPULACE_LLM_ALLOWED_HOSTS"] == "gpu-1:8000,api.openai.com"
    assert child["POPULACE_LLM_KEYS_FILE"] == str(keys)
    assert "sk-x" not in str(child), "the keys stay in the file"

    monkeypatch.delenv("POPULACE_LLM_ALLOWED_HOSTS")
    monkeypatch.delenv("POPULACE_LLM_KEYS_FILE")
    assert WorkerSettings(join_token="t").llm_allowed_hosts == ""
    with pytest.raises(ValidationError, match="llm_allowed_hosts"):
        WorkerSettings(join_token="t", llm_allowed_hosts="http://gpu-1")
    with pytest.raises(ValidationError, match="no such file"):
        WorkerSettings(join_token="t", llm_keys_file=tmp_path / "nope")
    keys.write_text("OPENAI_API_KEY sk-x\n")
    with pytest.raises(ValidationError, match="line 1") as err:
        WorkerSettings(join_token="t", llm_keys_file=keys)
    assert "sk-x" not in str(err.value)


async def test_a_server_echoing_the_key_it_refused_does_not_leak_it_through_a_probe():
    async def refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        sent = next(
            line.split(":", 1)[1].strip()
            for line in head.split("\r\n")
            if line.lower().startswith("authorization:")
        )
        body = json.dumps({"error": {"message": f"Incorrect API key provided: {sent}"}}).encode()
        writer.write(
            b"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(refuse, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    access = LlmAccess(environ=env(LLM_KEY=KEY))
    client = LlmClient(access=access)
    try:
        specs = endpoint_specs(
            [endpoint(f"http://127.0.0.1:{port}", api_key_env="LLM_KEY")], access=access
        )
        (status,) = await probe(client, specs, 5)
        assert not status.ok and "HTTP 401" in status.error and "***" in status.error
        assert KEY not in status.error
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()
