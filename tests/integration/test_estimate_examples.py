"""The estimate counts as the run spends: for every example simulation that uses an LLM, shrunk
to a few hundred agents and a few rounds, POST /api/simulations/estimate's requests and prompt
tokens are within 2x of what the run's meters then record (both ways).

Real manager, two real worker processes (each answers its own agents: sharing answers is per
process; a distribution read is one for the cluster),
and real OpenAI-compatible HTTP servers of the tests' own (bench.openai_server) answering from
a toy language model whose logprobs are the distribution its answers are sampled from, so
exchangeable agents read real trees and draw from them. The toy model speaks vLLM's constraint
dialect only (structured_outputs), so the llama.cpp example's endpoints are declared as vLLM
endpoints taking one prompt a request, as llama.cpp does: its accounting (one prompt a
request, two in flight each) is the example's.

Two populations: the template example as it is (a persona per age and occupation: most prompts
are an agent's own at this size) and the same with a coarse persona (one per occupation: ten
prompts, shared by dozens of agents, which is where reads and shared prompts count).
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import pytest
import yaml

from backend.simulations.config import LlmPolicyConfig
from backend.simulations.config import parse_config as parse_simulation
from bench.openai_server import OpenAIServer
from tests.support import running_cluster
from tests.support_populations import deploy_population
from tests.support_simulations import finish, rounds_of

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
POPULATION = EXAMPLES / "populations" / "template-personas.yaml"
LLM_EXAMPLES = sorted(
    p
    for p in (EXAMPLES / "simulations").glob("*.yaml")
    if isinstance(parse_simulation(p.read_text()).policy, LlmPolicyConfig)
)
AGENTS = 2000
ROUNDS = 3
COARSE_PERSONA = "You are a {occupation}."


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("estimate")
    with running_cluster(tmp, f"sqlite+aiosqlite:///{tmp}/populace.db", procs=2) as manager:
        yield manager


def _config(persona: str | None) -> dict:
    """The example population at AGENTS agents, its persona template replaced by `persona`."""
    config = yaml.safe_load(POPULATION.read_text())
    config["size"] = AGENTS
    if persona is not None:
        config["name"] += " (coarse personas)"
        config["persona"]["template"] = persona
    return config


@pytest.fixture(scope="module")
def populations(cluster) -> dict[str, int]:
    with cluster.api() as api:
        return {
            "example personas": deploy_population(api, _config(None))["id"],
            "coarse personas": deploy_population(api, _config(COARSE_PERSONA))["id"],
        }


def _shrunk(path: Path, population_id: int, servers: list[OpenAIServer]) -> dict:
    """The example on a small population for a few rounds, its endpoints on the fake servers
    (one each), each keeping its model, concurrency, batch size and price."""
    config = yaml.safe_load(path.read_text())
    config.update(population_id=population_id, rounds=ROUNDS, name=f"{config['name']} (shrunk)")
    config.pop("stop_when_converged", None)  # every round is played, as estimated
    config.get("deadlines", {}).pop("round_s", None)
    for endpoint, server in zip(config["policy"]["endpoints"], servers, strict=False):
        endpoint["base_url"] = server.base_url
        if endpoint.get("server") == "llama_cpp":
            endpoint.update(server="vllm", batch_size=1)
    return config


@pytest.mark.parametrize("persona", ["example personas", "coarse personas"])
@pytest.mark.parametrize("path", LLM_EXAMPLES, ids=[p.name for p in LLM_EXAMPLES])
def test_the_estimate_is_within_twice_the_run(cluster, populations, path: Path, persona: str):
    endpoints = len(yaml.safe_load(path.read_text())["policy"]["endpoints"])
    with ExitStack() as stack, cluster.api() as api:
        servers = []
        for _ in range(endpoints):
            server = stack.enter_context(OpenAIServer(model="m", validate="vllm"))
            server.behaviour.toy_lm = True
            servers.append(server)
        config = _shrunk(path, populations[persona], servers)
        for endpoint in config["policy"]["endpoints"]:
            endpoint["model"] = "m"
        config["policy"].pop("model", None)
        resp = api.post("/api/simulations/estimate", json=config)
        assert resp.status_code == 200, resp.text
        estimate = resp.json()
        resp = api.post("/api/simulations", json=config)
        assert resp.status_code == 202, resp.text
        sid = resp.json()["id"]
        done = finish(api, sid, timeout=300)
        rounds = rounds_of(api, sid)
    assert done["status"] == "completed", done
    assert len(rounds) == ROUNDS
    actual = {
        "requests": sum(r["llm_requests"] for r in rounds),
        "prompt_tokens": sum(r["prompt_tokens"] for r in rounds),
    }
    print(
        f"{path.name} / {persona}: mode {estimate['llm_mode']}, estimated "
        f"{estimate['requests']} requests ({estimate['reads']} reads, {estimate['asks']} asks), "
        f"{estimate['prompt_tokens']} prompt tokens; the run: {actual} "
        f"per round {[r['llm_requests'] for r in rounds]} vs {estimate['per_round']}"
    )
    assert actual["requests"] == sum(s.requests for s in servers)
    for what, used in actual.items():
        assert used > 0
        assert used / 2 <= estimate[what] <= used * 2, (what, estimate[what], used)
