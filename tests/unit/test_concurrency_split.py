"""An LLM endpoint's max_concurrency is a total the manager splits between the workers."""

from __future__ import annotations

import pytest

from backend.simulations.config import SimulationConfig
from backend.simulations.spec import per_worker_requests, policy_proto, split_total
from worker_server.llm.endpoint_rules import DEFAULT_TOTAL_CONCURRENCY
from worker_server.rpc import worker_pb2 as pb


@pytest.mark.parametrize(
    "total, parts, shares",
    [
        (16, 1, [16]),
        (16, 2, [8, 8]),
        (7, 3, [3, 2, 2]),
        (2, 4, [1, 1, 1, 1]),
        (256, 3, [86, 85, 85]),
    ],
)
def test_split_total(total, parts, shares):
    assert split_total(total, parts) == shares


def test_each_worker_gets_its_share_of_every_endpoint_and_nothing_else_changes():
    request = pb.RunRoundRequest(round_id="r", round=3, seed=9)
    request.policy.llm.endpoints.add(base_url="http://a", model="m", max_concurrency=5)
    request.policy.llm.endpoints.add(base_url="http://b", model="m", max_concurrency=256)
    out = per_worker_requests(request, ["w1:1", "w2:1"])
    assert [[e.max_concurrency for e in out[a].policy.llm.endpoints] for a in ("w1:1", "w2:1")] == [
        [3, 128],
        [2, 128],
    ]
    for own in out.values():
        own.policy.llm.endpoints[0].max_concurrency = 5
        own.policy.llm.endpoints[1].max_concurrency = 256
        assert own == request
    assert request.policy.llm.endpoints[0].max_concurrency == 5, "the original is untouched"


def test_non_llm_rounds_and_a_single_worker_share_one_request():
    request = pb.RunRoundRequest(round_id="r")
    request.policy.synthetic.latency_s = 1.0
    assert per_worker_requests(request, ["a", "b"]) == {"a": request, "b": request}


@pytest.mark.parametrize("server", sorted(DEFAULT_TOTAL_CONCURRENCY))
def test_the_default_total_depends_on_the_server(server):
    endpoint = {"base_url": "http://127.0.0.1:8000", "model": "m", "server": server}
    config = SimulationConfig.model_validate(
        {
            "population_id": 1,
            "rounds": 1,
            "rule": {"preset": "2/3"},
            "policy": {"kind": "llm", "endpoints": [endpoint]},
        }
    )
    (sent,) = policy_proto(config).llm.endpoints
    assert sent.max_concurrency == DEFAULT_TOTAL_CONCURRENCY[server]
    explicit = config.model_copy(deep=True)
    explicit.policy.endpoints[0].max_concurrency = 5
    assert policy_proto(explicit).llm.endpoints[0].max_concurrency == 5
