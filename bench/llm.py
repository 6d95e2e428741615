"""`populace bench llm`: the platform's LLM throughput against a direct client loop.

For each server, in one run: a direct asyncio loop sends one completion per agent at a fixed
concurrency, with the workers' own HTTP/1.1 client, and times answers per second; then a real
manager-side round (LocalCluster worker processes hosting the same agents, the LLM policy,
`run_round` over gRPC) sends the same request bodies (prompts, seeds, grammar) with the same
total concurrency, split between the worker processes. The two alternate over slices of the
agents (ABBA order) so drifting machine load favours neither; then the direct loop runs once
more with httpx, for reference. The figure is platform answers/s over direct answers/s (target >= 0.9); an
answer is a completion received, whether or not it parses as a valid number (validity is
reported beside it).

Servers: `fixed-latency` is bench/openai_server.py out of process, answering after a fixed
latency; `gemma-local` is llama.cpp's server with Gemma 3 270M on CPU (extra llm-local).
Prints one JSON line per server.
"""

from __future__ import annotations

import asyncio
import math
import re
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
import numpy as np

from backend.llm_local import default_threads
from backend.workers.grpc_client import AgentColumns, WorkerClient, WorkerCredentials
from bench.cluster import LocalCluster, free_port
from bench.processes import spawn, track
from worker_server.rpc import worker_pb2 as pb

EDUCATION = ["primary school", "high school", "bachelor's degree", "master's degree", "doctorate"]
PERSONA = "You are an adult whose highest education is {education}."
# A short prompt for a base model; the grammar makes the answer an integer in [0, 100].
# Only {persona} varies, so the direct loop renders exactly what the workers send. It comes
# last: llama.cpp's server reuses the previous prompt's KV cache for the common prefix.
USER_TEMPLATE = (
    "Everyone picks a number from 0 to 100; whoever is closest to two thirds of the average "
    "wins. {persona}\nMy number:"
)
RULE = pb.GameRule(ratio=2 / 3, offset=0, min=0, max=100)
MAX_TOKENS = 6
TEMPERATURE = 0.7
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


@dataclass(frozen=True)
class Target:
    server: str  # "fixed-latency" or "gemma-local"
    agents: int
    concurrency: int
    latency_s: float | None = None
    replicas: int = 1  # gemma-local: server processes, one endpoint each
    threads: int = 0  # gemma-local: CPU threads in total (0: every core but one)
    blocks: int = 2  # direct and platform alternate over this many slices of the agents


@dataclass(frozen=True)
class Served:
    base_urls: list[str]
    model: str
    kind: str  # LlmEndpoint.server: how constrained output is asked for
    pids: tuple[int, ...] = ()  # the server processes (fixed-latency), for their CPU time


@contextmanager
def _fixed_latency_server(
    latency_s: float, processes: int = 1, extra: tuple[str, ...] = ()
) -> Iterator[Served]:
    """bench/openai_server.py as `processes` processes, each listed as an endpoint of the
    same model (`extra`: more of its command-line options)."""
    model = "bench-model"
    procs: list[subprocess.Popen] = []
    try:
        for _ in range(processes):
            procs.append(
                spawn(
                    [sys.executable, "-m", "bench.openai_server", "--port", str(free_port())]
                    + ["--latency-s", str(latency_s), "--model", model, *extra],
                    stdout=subprocess.PIPE,
                    text=True,
                )
            )
        urls = []
        for proc in procs:
            url = proc.stdout.readline().strip()
            if not url.startswith("http"):
                raise RuntimeError(f"bench.openai_server did not start (exit {proc.wait(10)})")
            urls.append(url)
        yield Served(urls, model, "openai", tuple(p.pid for p in procs))
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def _gemma_server(replicas: int, threads: int) -> Iterator[Served]:
    from backend.llm_local import start_local_llm

    port = _free_port_run(replicas)
    with start_local_llm(port, replicas=replicas, threads=threads) as llm:
        for proc in llm.processes:
            track(proc)
        yield Served(llm.base_urls, llm.model, "llama_cpp")


def _free_port_run(n: int) -> int:
    """A first port such that port..port+n-1 are free now."""
    for _ in range(100):
        port = free_port()
        if port + n <= 65535 and all(_port_free(port + i) for i in range(1, n)):
            return port
    raise RuntimeError(f"no run of {n} free ports")


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _population(agents: int, seed: int) -> AgentColumns:
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, len(EDUCATION), agents, dtype=np.uint32)
    return AgentColumns(
        population_id=f"bench-llm-{uuid.uuid4().hex[:8]}",
        ids=np.arange(1, agents + 1, dtype=np.int64),
        codes={"education": codes},
        categories={"education": EDUCATION},
        personas=[PERSONA.format(education=EDUCATION[c]) for c in codes],
    )


def _prompts(population: AgentColumns) -> list[str]:
    """What the workers send: the user template filled per agent (no system template)."""
    return [USER_TEMPLATE.replace("{persona}", p) for p in population.personas]


def _valid(text: str) -> bool:
    match = _NUMBER.search(text or "")
    return match is not None and RULE.min <= float(match.group()) <= RULE.max


def _body(
    served: Served,
    prompt: str | list[str],
    seed: int,
    system: str = "",
    max_tokens: int = MAX_TOKENS,
    temperature: float = TEMPERATURE,
    integers: bool = False,
) -> dict:
    """The body a worker sends (same prompt or prompt array, limits and answer constraint)."""
    from worker_server.llm.answers import NumberConstraint
    from worker_server.llm.protocol import Generation

    several = isinstance(prompt, list)
    return Generation(
        api="completions",
        model=served.model,
        system=system,
        user="" if several else prompt,
        prompts=tuple(prompt) if several else (),
        max_tokens=max_tokens,
        temperature=temperature,
        seed=seed,
        constraint=NumberConstraint.for_range(RULE.min, RULE.max, integers),
    ).body(served.kind)


class _HttpxPost:
    """httpx, one AsyncClient per request in flight: its shared pool costs milliseconds of CPU
    per request at a few dozen connections (bookkeeping quadratic in the pool size)."""

    def __init__(self, base_url: str) -> None:
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        self._client = httpx.AsyncClient(base_url=base_url, limits=limits, timeout=300)

    async def post(self, path: str, body: dict) -> dict:
        resp = await self._client.post(path, json=body)
        resp.raise_for_status()
        return resp.json()

    async def aclose(self) -> None:
        await self._client.aclose()


class _LeanPost:
    """The workers' own HTTP/1.1 keep-alive client (worker_server.llm.http), one connection."""

    def __init__(self, base_url: str) -> None:
        from worker_server.llm.http import HttpPool

        self._pool = HttpPool(base_url, max_idle=1)

    async def post(self, path: str, body: dict) -> dict:
        resp = await self._pool.request("POST", path, body)
        if resp.status != 200:
            raise ValueError(f"HTTP {resp.status}")
        return resp.json()

    async def aclose(self) -> None:
        await self._pool.aclose()


DIRECT_CLIENTS = {"httpx": _HttpxPost, "lean": _LeanPost}


def _agent_seeds(population: AgentColumns, seed: int) -> list[int]:
    """The per-agent seeds the workers derive for round 1, so both sides sample alike."""
    from worker_server.rounds import randomness

    return randomness.words(seed, 1, randomness.LLM_SEED, population.ids).tolist()


async def _direct(
    served: Served,
    prompts: list[str],
    seeds: list[int],
    concurrency: int,
    client: str,
    batch_size: int = 1,
    **generation,
) -> dict:
    """The floor: one asyncio loop, `concurrency` senders each with its own keep-alive
    connection (spread evenly over the server's endpoints) taking the next prompt (the next
    `batch_size` prompts, as one prompt array with the first one's seed) until none are left.
    `generation`: _body's system, max_tokens, temperature, integers."""
    from worker_server.llm.http import HttpError

    next_start = iter(range(0, len(prompts), batch_size))
    answered = valid = errors = completion_tokens = 0

    async def sender(post) -> None:
        nonlocal answered, valid, errors, completion_tokens
        for i in next_start:
            batch = prompts[i : i + batch_size]
            try:
                body = _body(served, batch if batch_size > 1 else batch[0], seeds[i], **generation)
                reply = await post.post("/v1/completions", body)
                texts = [choice["text"] for choice in reply["choices"]]
            except (httpx.HTTPError, HttpError, KeyError, IndexError, ValueError, TypeError):
                errors += len(batch)
                continue
            answered += len(texts)
            valid += sum(map(_valid, texts))
            completion_tokens += reply.get("usage", {}).get("completion_tokens", 0)

    urls = served.base_urls
    senders = [DIRECT_CLIENTS[client](urls[k % len(urls)]) for k in range(concurrency)]
    try:
        started = time.perf_counter()
        await asyncio.gather(*(sender(post) for post in senders))
        elapsed = time.perf_counter() - started
    finally:
        for post in senders:
            await post.aclose()
    return {
        "s": elapsed,
        "answered": answered,
        "valid": valid,
        "errors": errors,
        "completion_tokens": completion_tokens,
    }


def _split(agents: AgentColumns, parts: int) -> list[AgentColumns]:
    bounds = np.linspace(0, len(agents), parts + 1).astype(int)
    return [agents.take(slice(a, b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _llm_policy(served: Served, per_endpoint: int) -> pb.Policy:
    return pb.Policy(
        llm=pb.LlmPolicy(
            endpoints=[
                pb.LlmEndpoint(
                    base_url=url,
                    model=served.model,
                    max_concurrency=per_endpoint,
                    server=served.kind,
                )
                for url in served.base_urls
            ],
            default_model=served.model,
            user_template=USER_TEMPLATE,
            api="completions",
            answer_mode="basic",
            max_tokens=MAX_TOKENS,
            temperature=TEMPERATURE,
            request_timeout_s=300,
            max_retries=0,
        )
    )


async def _platform_round(
    clients: list[WorkerClient], block: AgentColumns, served: Served, per_endpoint: int, seed: int
) -> dict:
    from backend.rounds.fanout import run_round

    request = pb.RunRoundRequest(
        round_id=uuid.uuid4().hex,
        population_id=block.population_id,
        simulation_id=f"bench-{uuid.uuid4().hex[:8]}",
        round=1,
        rule=RULE,
        policy=_llm_policy(served, per_endpoint),
        seed=seed,
    )
    result = await run_round(clients, request)
    partials = result.partials.values()
    llm_errors = sum(p.llm_errors for p in partials)
    return {
        "s": result.elapsed_s,
        # Agents whose request got a completion (unparseable or out-of-range included);
        # late agents are in neither count.
        "answered": result.stats.n_valid + result.stats.n_invalid - llm_errors,
        "valid": result.stats.n_valid,
        "late": sum(p.n_late for p in partials),
        "llm_errors": llm_errors,
        "prompt_tokens": sum(p.prompt_tokens for p in partials),
        "completion_tokens": sum(p.completion_tokens for p in partials),
    }


def _blocks(population: AgentColumns, n: int) -> list[AgentColumns]:
    """Contiguous slices, each deployed as its own population (one platform round each)."""
    blocks = []
    for k, part in enumerate(_split(population, n)):
        part.population_id = f"{population.population_id}-{k}"
        blocks.append(part)
    return blocks


def _add(total: dict, part: dict) -> None:
    for key, value in part.items():
        total[key] = total.get(key, 0) + value


async def _compare(
    addresses: list[str],
    secret: str,
    population: AgentColumns,
    served: Served,
    per_endpoint: int,
    concurrency: int,
    seed: int,
    blocks: int,
) -> tuple[dict, dict, dict]:
    """Direct loop and platform rounds over the same agents, block by block in ABBA order
    (direct, platform, platform, direct, ...), so load drifting on the machine cannot favour
    either side; then the direct loop once more with httpx, for reference."""
    prompts = _prompts(population)
    seeds = _agent_seeds(population, seed)
    clients = [WorkerClient(a, WorkerCredentials(secret)) for a in addresses]
    direct: dict = {}
    platform: dict = {}
    try:
        parts = _blocks(population, blocks)
        for part in parts:
            shares = _split(part, len(clients))
            await asyncio.gather(
                *(c.create_agents(s) for c, s in zip(clients, shares, strict=True))
            )
        # Warm up each endpoint (page faults, first-request setup) outside the timings.
        endpoints = len(served.base_urls)
        await _direct(served, prompts[:1] * endpoints, seeds, endpoints, "lean")
        start = 0
        for k, part in enumerate(parts):
            rows = slice(start, start + len(part))
            start += len(part)

            async def direct_block(rows=rows):
                return await _direct(served, prompts[rows], seeds[rows], concurrency, "lean")

            async def platform_block(part=part):
                return await _platform_round(clients, part, served, per_endpoint, seed)

            if k % 2 == 0:
                _add(direct, await direct_block())
                _add(platform, await platform_block())
            else:
                _add(platform, await platform_block())
                _add(direct, await direct_block())
        reference = await _direct(served, prompts, seeds, concurrency, "httpx")
        await asyncio.gather(*(c.delete_agents(all=True) for c in clients))
    finally:
        for client in clients:
            await client.close()
    return direct, platform, reference


def _event_loop_runner() -> asyncio.Runner:
    try:  # the loop the workers use, so only the design differs
        import uvloop

        return asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:
        return asyncio.Runner()


def measure(target: Target, procs: int = 2, seed: int = 7) -> dict:
    """One JSON-able result for one server: direct loop and platform round, same prompts."""
    replicas = target.replicas if target.server == "gemma-local" else 1
    # Endpoint caps are per worker process: the same total in flight on both sides.
    per_endpoint = max(1, target.concurrency // (procs * replicas))
    concurrency = per_endpoint * procs * replicas
    population = _population(target.agents, seed)
    serve = (
        _fixed_latency_server(target.latency_s)
        if target.server == "fixed-latency"
        else _gemma_server(replicas, target.threads)
    )
    with serve as served, LocalCluster() as cluster:
        cluster.start_node(procs=procs)
        addresses = [w["address"] for w in cluster.wait_online(procs)]
        with _event_loop_runner() as runner:
            direct, platform, httpx_loop = runner.run(
                _compare(
                    addresses,
                    cluster.rpc_secret,
                    population,
                    served,
                    per_endpoint,
                    concurrency,
                    seed,
                    target.blocks,
                )
            )
    direct_per_s = direct["answered"] / direct["s"]
    httpx_per_s = httpx_loop["answered"] / httpx_loop["s"]
    platform_per_s = platform["answered"] / platform["s"]
    return {
        "benchmark": "llm",
        "server": target.server,
        "agents": target.agents,
        "procs": procs,
        "concurrency": concurrency,
        "blocks": target.blocks,
        "latency_s": target.latency_s,
        "replicas": replicas if target.server == "gemma-local" else None,
        "threads": (target.threads or default_threads())
        if target.server == "gemma-local"
        else None,
        "direct_per_s": round(direct_per_s, 2),
        "platform_per_s": round(platform_per_s, 2),
        "ratio": round(platform_per_s / direct_per_s, 3) if direct_per_s else math.nan,
        "direct_httpx_per_s": round(httpx_per_s, 2),
        "ratio_vs_httpx": round(platform_per_s / httpx_per_s, 3) if httpx_per_s else math.nan,
        "direct_s": round(direct["s"], 3),
        "platform_s": round(platform["s"], 3),
        **{f"direct_{k}": v for k, v in direct.items() if k != "s"},
        **{f"direct_httpx_{k}": v for k, v in httpx_loop.items() if k != "s"},
        **{f"platform_{k}": v for k, v in platform.items() if k != "s"},
    }
