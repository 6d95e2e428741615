"""`populace bench round --policy llm`: an LLM round through the manager, against a direct client.

Starts `servers` processes of bench/openai_server.py (fixed latency, listed as that many endpoints
of one model, server kind "openai", the completions API), a scratch Postgres database, a real
manager on it and one worker node with `procs` processes (bench.harness, shared with
`populace bench synthetic`). Deploys `agents` agents with `POST /api/populations` (template
personas from three attributes, one of them an income from bins), then runs a `rounds`-round simulation with `POST /api/simulations`
and the LLM policy: the roleplay prompt (so each agent's prompt carries its persona), temperature
0.7 (so every agent asks: at temperature 0 agents with identical prompts share one request), the
endpoints' max_concurrency summing to `concurrency` (a total per endpoint, which the manager
splits between the worker processes). Every decision and round is persisted on Postgres.

round_s is read from the manager's websocket events: a round's first `round.progress` to its
`round.completed`, which comes after the outcome and persistence. llm_requests is the rounds
API's count of requests the workers sent (retries included). CPU seconds (user + system) of the
worker node, the manager, the Postgres processes of the scratch database and the fake servers are
read with psutil from just before the simulation is POSTed to its end.

Right after, on the same servers: a direct client loop (bench.llm._direct, one asyncio loop on
uvloop in this process, the workers' own HTTP/1.1 client, `concurrency` senders each with one
keep-alive connection spread over the endpoints) sends as many requests as the round sent, with the
very bodies the workers send (the prompts rendered from the manager's templates and the agents'
personas as stored, the same seeds, limits and answer constraint). It has no manager, no worker
processes, no gRPC, no outcome and no persistence: it is the floor the platform is compared with.
platform_vs_direct = direct_s / round_s (per round; target >= 0.9 unbatched at 10^5, issue 13).

--exchangeable: personas over three categorical attributes (48 distinct prompts) and
identical_prompts: share, against fake servers with a toy language model (vLLM endpoints).
--gemma: the same against `servers` real llama.cpp servers with Gemma 3 270M and logprobs (one
CPU thread each); the direct loop then asks a random sample of agents, and its time is
extrapolated to every agent (per-agent calls for 10^6 agents would take days on CPU).
Prints one JSON line.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager

import asyncpg
import numpy as np
import psutil

from bench import harness, processes
from bench.cluster import LocalCluster
from bench.deploy import _plain, scratch_database
from bench.llm import (
    Served,
    _direct,
    _event_loop_runner,
    _fixed_latency_server,
    _free_port_run,
)
from bench.synthetic import CONFIG as SYNTHETIC_CONFIG

# The synthetic benchmark's population with a yearly income from bins in the persona, so that
# prompts differ between agents (as LLM-written personas or histories make them differ): a
# batch at temperature > 0 may not carry one prompt twice.
CONFIG = (
    SYNTHETIC_CONFIG.replace("synthetic-benchmark", "round-benchmark")
    .replace(
        "persona:",
        "  - name: income\n"
        "    bins:\n"
        "      - {{name: modest, min: 12000, max: 39999, weight: 0.5}}\n"
        "      - {{name: comfortable, min: 40000, max: 249999, weight: 0.5}}\n"
        "persona:",
    )
    .replace("is {{education}}.", "is {{education}}, earning {{income_value}} a year.")
)
TEMPERATURE = 0.7
AGENT_DEADLINE_S = 300.0
# --gemma: a distribution read waits its turn behind the other prompts' on two CPU servers.
GEMMA_AGENT_DEADLINE_S = 3600.0
GEMMA_SERVER = (
    "llama.cpp (llama-cpp-python) Gemma 3 270M Q4_K_M, `populace llm serve-local --logprobs`, "
    "one thread per server, server kind llama_cpp, completions API"
)
GEMMA_DIRECT_NOTE = (
    "direct (--gemma): the same client loop as with the fake servers, over a random sample of "
    "`direct.agents_asked` agents' prompts, one request per agent (per-agent calls for every "
    "agent would take days on CPU); round_s_direct EXTRAPOLATES its rate to all the agents."
)

DIRECT_NOTE = (
    "direct: one asyncio loop (uvloop) in the bench process with the workers' own HTTP client, "
    "`concurrency` senders with one keep-alive connection each over the same endpoints, sending "
    "as many requests as the round sent with the same bodies (prompts, seeds, limits, answer "
    "constraint); it does NOT go through the manager, worker processes or gRPC, and does NOT "
    "compute the outcome or persist anything. The platform round does all of that: its round_s "
    "runs from the round's start to round.completed, after its decisions are on Postgres."
)


def _endpoint_totals(total: int, endpoints: int) -> list[int]:
    from backend.simulations.spec import split_total

    return split_total(total, endpoints)


# Exchangeable agents (--exchangeable): template personas over three categorical attributes
# (4 x 3 x 4 = 48 distinct prompts), and the default identical_prompts: share.
EXCHANGEABLE_CONFIG = (
    SYNTHETIC_CONFIG.replace("synthetic-benchmark", "exchangeable-benchmark")
    .replace(
        "persona:",
        "  - name: region\n"
        "    categories:\n"
        "      - {{name: north, weight: 0.25}}\n"
        "      - {{name: south, weight: 0.25}}\n"
        "      - {{name: east, weight: 0.25}}\n"
        "      - {{name: west, weight: 0.25}}\n"
        "persona:",
    )
    .replace("is {{education}}.", "is {{education}}, living in the {{region}}.")
)


def simulation_body(
    population_id: int,
    served: Served,
    concurrency: int,
    rounds: int,
    seed: int,
    batch_size: int = 1,
    exchangeable: bool = False,
    integer_answers: bool = False,
    agent_s: float = AGENT_DEADLINE_S,
) -> dict:
    totals = _endpoint_totals(concurrency, len(served.base_urls))
    return {
        "population_id": population_id,
        "rounds": rounds,
        "prompt": {"system": "roleplay", "user": "basic"},
        "policy": {
            "kind": "llm",
            "endpoints": [
                {
                    "base_url": url,
                    "model": served.model,
                    "max_concurrency": c,
                    "server": served.kind,
                    "batch_size": batch_size,
                }
                for url, c in zip(served.base_urls, totals, strict=True)
            ],
            "api": "completions",
            "temperature": TEMPERATURE,
            # Every agent asks (template personas repeat: shared prompts would ask once), or
            # agents with one prompt draw from its distribution, read once (exchangeable).
            "identical_prompts": "share" if exchangeable else "each_asks",
            "integer_answers": integer_answers,
        },
        "deadlines": {"agent_s": agent_s},
        "segment_by": ["education"],
        "seed": seed,
    }


async def _agents(database_url: str, population_id: int) -> list:
    conn = await asyncpg.connect(_plain(database_url))
    try:
        return await conn.fetch(
            "SELECT id, persona, attributes FROM agents WHERE population_id = $1 ORDER BY id",
            population_id,
        )
    finally:
        await conn.close()


def direct_requests(
    body: dict, agents: list, round_number: int = 1
) -> tuple[list[str], list[int], dict]:
    """Round `round_number`'s prompts (system and user joined as the completions API sends them),
    seeds and generation settings, exactly as the workers build them for these agents (no
    history: round 1)."""
    from backend.simulations.config import SimulationConfig
    from backend.simulations.spec import llm_policy
    from worker_server.llm.templates import Template, number_text
    from worker_server.rounds import randomness

    config = SimulationConfig.model_validate(body)
    policy = llm_policy(config, config.policy)
    system, user = Template(policy.system_template), Template(policy.user_template)
    ratio, offset = config.rule.resolved
    base = {
        "round": str(round_number),
        "min": number_text(config.rule.min),
        "max": number_text(config.rule.max),
        "ratio": f"{ratio:g}",
        "offset": f"{offset:g}",
        "history": "",
        "persona": "",
    }
    prompts = []
    for row in agents:
        attributes = row["attributes"]
        if isinstance(attributes, str):
            attributes = json.loads(attributes)
        values = {**{k: str(v) for k, v in attributes.items()}, **base, "persona": row["persona"]}
        s, u = system.render(values), user.render(values)
        prompts.append(f"{s}\n\n{u}" if s else u)
    ids = np.array([row["id"] for row in agents], dtype=np.int64)
    seeds = randomness.words(config.seed, round_number, randomness.LLM_SEED, ids).tolist()
    generation = {
        "max_tokens": policy.max_tokens,
        "temperature": policy.temperature,
        "integers": policy.integer_answers,
    }
    return prompts, seeds, generation


@contextmanager
def _gemma_servers(servers: int) -> Iterator[Served]:
    """`servers` llama.cpp servers with Gemma 3 270M and logprobs (a tree read needs them), one
    CPU thread each, listed as that many endpoints."""
    from backend.llm_local import start_local_llm

    port = _free_port_run(servers)
    with start_local_llm(port, replicas=servers, threads=servers, logprobs=True) as llm:
        for proc in llm.processes:
            processes.track(proc)
        pids = tuple(proc.pid for proc in llm.processes)
        yield Served(llm.base_urls, llm.model, "llama_cpp", pids)


def run(
    agents: int = 100_000,
    procs: int = 2,
    servers: int = 2,
    concurrency: int | None = None,
    latency_s: float = 1.0,
    rounds: int = 1,
    seed: int = 7,
    batch_size: int = 1,
    exchangeable: bool = False,
    admin_url: str = "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres",
    gemma: bool = False,
    integer_answers: bool = False,
    direct_sample: int = 200,
) -> dict:
    """concurrency: requests in flight in total (default: 4,000 on the fake servers, one per
    Gemma server). gemma: real Gemma servers instead of fake ones (exchangeable agents; the
    direct loop asks a sample of `direct_sample` agents and is extrapolated)."""
    exchangeable = exchangeable or gemma
    concurrency = concurrency or (servers if gemma else 4000)
    with (
        _llm_servers(gemma, exchangeable, servers, latency_s) as serving_now,
        scratch_database(admin_url) as database_url,
        LocalCluster(POPULACE_DATABASE_URL=database_url) as cluster,
    ):
        # The toy model answers within vLLM's structured_outputs regex: the endpoints are vLLM.
        served = serving_now
        if exchangeable and not gemma:
            served = dataclasses.replace(serving_now, kind="vllm")
        node = cluster.start_node(procs=procs)
        cluster.wait_online(procs)
        config = EXCHANGEABLE_CONFIG if exchangeable else CONFIG
        population_id, deploy_s = harness.deploy(cluster, config.format(size=agents, seed=seed))
        body = simulation_body(
            population_id,
            served,
            concurrency,
            rounds,
            seed,
            batch_size,
            exchangeable,
            integer_answers,
            GEMMA_AGENT_DEADLINE_S if gemma else AGENT_DEADLINE_S,
        )
        servers_label = "llm_servers" if gemma else "fake_servers"
        platform = harness.simulate(
            cluster, database_url, node, body, others={servers_label: set(served.pids)}
        )
        rows = asyncio.run(_agents(database_url, population_id))
        prompts, seeds, generation = direct_requests(body, rows)
        distinct = len(set(prompts))
        # As many prompts as the round asked for, in requests of the same size (exchangeable:
        # one per agent, the calls it saves); on Gemma a random sample of the agents.
        asked = agents * len(platform.rounds)
        if gemma:
            prompts, seeds = _sample(prompts, seeds, direct_sample, seed)
            asked = direct_sample
        direct = _direct_loop(
            served, prompts, seeds, generation, asked, concurrency, batch_size, servers_label
        )
    report = _report(
        agents, procs, servers, concurrency, latency_s, deploy_s, platform, direct, batch_size
    )
    return _labelled(report, body, integer_answers, exchangeable, gemma, distinct)


def _cpu(cpu_s: dict[str, float], agent_rounds: int) -> dict:
    """CPU seconds per process kind, and per agent and round (the platform's: workers and
    manager)."""
    platform_s = cpu_s["workers"] + cpu_s["manager"]
    return {
        "cpu_s": cpu_s,
        "cpu_us_per_agent_round": {k: round(v / agent_rounds * 1e6, 2) for k, v in cpu_s.items()},
        "platform_cpu_us_per_agent_round": round(platform_s / agent_rounds * 1e6, 2),
    }


def _direct_part(direct: dict) -> dict:
    """The direct loop's figures, labelled with what it skips."""
    return {
        "what": DIRECT_NOTE,
        "requests": direct["requests"],
        "agents_asked": direct["agents_asked"],
        "s": round(direct["s"], 3),
        "answered": direct["answered"],
        "valid": direct["valid"],
        "errors": direct["errors"],
        "cpu_s": direct["cpu_s"],
        "cpu_us_per_request": {
            k: round(v / max(1, direct["requests"]) * 1e6, 2) for k, v in direct["cpu_s"].items()
        },
    }


def _labelled(
    report: dict, body: dict, integer_answers: bool, exchangeable: bool, gemma: bool, distinct
) -> dict:
    """The report, saying which answers were asked for and what served them."""
    report["identical_prompts"] = body["policy"]["identical_prompts"]
    report["integer_answers"] = integer_answers
    if exchangeable:
        report["server"] += " with --toy-lm (answers and logprobs from a toy language model)"
        report["distinct_prompts"] = distinct
    if gemma:
        report["server"] = GEMMA_SERVER
        report["latency_s"] = None
        report["direct"]["what"] = GEMMA_DIRECT_NOTE
    return report


def _llm_servers(gemma: bool, exchangeable: bool, servers: int, latency_s: float):
    """The servers the round calls: real Gemma ones, or fake ones at a fixed latency (with the
    toy language model for exchangeable agents: it samples what its logprobs say, so reading
    distributions from logprobs is what a real model's would be)."""
    if gemma:
        return _gemma_servers(servers)
    extra = ("--toy-lm", "--validate", "vllm") if exchangeable else ()
    return _fixed_latency_server(latency_s, servers, extra)


def _sample(prompts: list, seeds: list, size: int, seed: int) -> tuple[list, list]:
    """A random sample of `size` agents' prompts and seeds (the direct loop on Gemma)."""
    sample = np.random.default_rng(seed).choice(len(prompts), size, replace=False)
    return [prompts[i] for i in sample], [seeds[i] for i in sample]


def _direct_loop(
    served: Served,
    prompts: list[str],
    seeds: list[int],
    generation: dict,
    asked: int,
    concurrency: int,
    batch_size: int = 1,
    servers_label: str = "fake_servers",
) -> dict:
    """`asked` prompts (the agents', cycled) in requests of `batch_size` at `concurrency`,
    timed, with the CPU seconds of this process (the client) and of the servers."""
    repeat = -(-asked // len(prompts))
    prompts, seeds = (prompts * repeat)[:asked], (seeds * repeat)[:asked]
    me = psutil.Process()
    server_pids = set(served.pids)
    with _event_loop_runner() as runner:
        # Warm up each endpoint's first request outside the timings, as bench llm does.
        endpoints = len(served.base_urls)
        runner.run(_direct(served, prompts[:endpoints], seeds, endpoints, "lean", **generation))
        client_before, servers_before = me.cpu_times(), harness.cpu(server_pids)
        started = time.perf_counter()
        result = runner.run(
            _direct(served, prompts, seeds, concurrency, "lean", batch_size, **generation)
        )
        result["s"] = time.perf_counter() - started
        client_after, servers_after = me.cpu_times(), harness.cpu(server_pids)
    client_s = (client_after.user + client_after.system) - (
        client_before.user + client_before.system
    )
    result["cpu_s"] = {
        "client": round(client_s, 2),
        servers_label: round(harness.spent(servers_before, servers_after), 2),
    }
    result["requests"] = -(-asked // batch_size)
    result["agents_asked"] = asked
    return result


def _report(
    agents: int,
    procs: int,
    servers: int,
    concurrency: int,
    latency_s: float,
    deploy_s: float,
    platform: harness.Run,
    direct: dict,
    batch_size: int = 1,
) -> dict:
    kept = platform.rounds
    rounds = len(kept)
    requests = sum(r["llm_requests"] for r in kept)
    llm_errors = sum(r["llm_errors"] for r in kept)
    answered = sum(r["n_valid"] + r["n_invalid"] for r in kept) - llm_errors
    agent_rounds = agents * rounds
    round_s = statistics.median(platform.round_s)
    # Per round, for every agent (extrapolated when the direct loop asked a sample).
    direct_round_s = direct["s"] * agent_rounds / direct["agents_asked"] / rounds
    return {
        "benchmark": "round",
        "policy": "llm",
        "entry": "manager API (POST /api/populations, POST /api/simulations)",
        "database": "postgresql",
        "server": "bench/openai_server.py (fixed latency), server kind openai, completions API",
        "agents": agents,
        "procs": procs,
        "endpoints": servers,
        "concurrency": concurrency,
        "latency_s": latency_s,
        "temperature": TEMPERATURE,
        "batch_size": batch_size,
        "batched_requests": batch_size > 1,
        "rounds": rounds,
        "deploy_s": round(deploy_s, 3),
        "round_s": [round(s, 3) for s in platform.round_s],
        # The manager's own duration_s: fan-out until the last decision, before the outcome
        # and persistence.
        "fanout_s": [round(r["duration_s"], 3) for r in kept],
        "run_wall_s": round(platform.wall_s, 3),
        "llm_requests": requests,
        "requests_per_agent": round(requests / agent_rounds, 4),
        "answered": answered,
        "n_valid": sum(r["n_valid"] for r in kept),
        "n_invalid": sum(r["n_invalid"] for r in kept),
        "n_late": sum(r["n_late"] for r in kept),
        "llm_errors": llm_errors,
        "decisions_persisted": platform.persisted,
        **_cpu(platform.cpu_s, agent_rounds),
        "direct": _direct_part(direct),
        "round_s_direct": round(direct_round_s, 3),
        "platform_vs_direct": round(direct_round_s / round_s, 3),
        "target_platform_vs_direct": 0.9,
    }
