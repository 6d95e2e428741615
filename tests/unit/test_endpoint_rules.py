"""One owner per rule: what the manager's config accepts, the worker accepts, and both refuse
the same things (worker_server.llm.endpoint_rules, worker_server.worker_states)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from backend.simulations.config import SimulationConfig
from backend.simulations.spec import policy_proto
from worker_server.llm.endpoint_rules import (
    DEFAULT_BATCH_SIZE,
    MAX_BATCH_SIZE,
    MAX_CONCURRENCY,
    SERVERS,
)
from worker_server.llm.spec import InvalidLlmRequest, endpoint_specs
from worker_server.rpc import worker_pb2 as pb
from worker_server.worker_states import WORKER_STATES, is_live, takes_agents


def _config(api: str = "completions", **endpoint) -> SimulationConfig:
    endpoint = {"base_url": "http://127.0.0.1:8000", "model": "m", **endpoint}
    return SimulationConfig.model_validate(
        {
            "population_id": 1,
            "rounds": 1,
            "policy": {"kind": "llm", "api": api, "endpoints": [endpoint]},
        }
    )


def _endpoint_errors(exc: ValidationError) -> dict[str, str]:
    return {str(e["loc"][-1]): e["msg"] for e in exc.errors()}


@pytest.mark.parametrize("server", SERVERS)
def test_what_the_manager_sends_by_default_the_worker_takes(server):
    (sent,) = policy_proto(_config(server=server)).llm.endpoints
    (spec,) = endpoint_specs([sent])
    assert spec.server == server
    assert spec.batch_size == DEFAULT_BATCH_SIZE[server]


@pytest.mark.parametrize("server, batch_size", [("llama_cpp", 2), ("vllm", MAX_BATCH_SIZE + 1)])
def test_a_batch_size_is_refused_by_manager_and_worker(server, batch_size):
    with pytest.raises(ValidationError) as refused:
        _config(server=server, batch_size=batch_size)
    assert "batch_size" in _endpoint_errors(refused.value)
    endpoint = pb.LlmEndpoint(base_url="http://h", model="m", server=server, batch_size=batch_size)
    with pytest.raises(InvalidLlmRequest, match="batch_size"):
        endpoint_specs([endpoint])


def test_a_server_that_takes_one_prompt_is_explained_in_the_same_words():
    with pytest.raises(ValidationError) as refused:
        _config(server="llama_cpp", batch_size=2)
    endpoint = pb.LlmEndpoint(base_url="http://h", model="m", server="llama_cpp", batch_size=2)
    with pytest.raises(InvalidLlmRequest) as worker_refused:
        endpoint_specs([endpoint])
    reason = str(worker_refused.value).split(" must ", 1)[1]
    assert reason in _endpoint_errors(refused.value)["batch_size"]


def test_the_concurrency_limit_is_one_number():
    with pytest.raises(ValidationError) as refused:
        _config(max_concurrency=MAX_CONCURRENCY + 1)
    assert "max_concurrency" in _endpoint_errors(refused.value)
    assert _config(max_concurrency=MAX_CONCURRENCY).policy.endpoints[0].max_concurrency == (
        MAX_CONCURRENCY
    )
    endpoint = pb.LlmEndpoint(base_url="http://h", model="m", max_concurrency=MAX_CONCURRENCY + 1)
    with pytest.raises(InvalidLlmRequest, match="max_concurrency"):
        endpoint_specs([endpoint])


@pytest.mark.parametrize(
    "given, stored",
    [
        ("http://h:8000/v1/", "http://h:8000"),
        (" https://api.example.com/v1", "https://api.example.com"),
    ],
)
def test_base_urls_are_normalised_by_the_one_rule(given, stored):
    assert _config(base_url=given).policy.endpoints[0].base_url == stored
    (spec,) = endpoint_specs([pb.LlmEndpoint(base_url=given, model="m")])
    assert spec.base_url == stored


def test_a_bad_port_is_refused_by_the_manager_too():
    with pytest.raises(ValidationError) as refused:
        _config(base_url="http://h:99999")
    assert "base_url" in _endpoint_errors(refused.value)


def test_worker_states_and_what_they_count_for():
    assert WORKER_STATES == ("online", "offline", "draining", "removed")
    assert [s for s in WORKER_STATES if is_live(s)] == ["online", "draining"]
    assert [s for s in WORKER_STATES if takes_agents(s)] == ["online"]
