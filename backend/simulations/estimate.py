"""What an LLM run will ask before it is launched: requests, tokens and cost, counted as the
workers spend them.

Each worker process answers its own agents (a cohort), and within it agents whose whole prompt
is identical share: at temperature 0 one request answers them all; at temperature > 0 with
basic answers over completions a prompt more than a few agents share is read once and they all
draw from it (fewer each ask). The rules that decide this are the workers' own
(worker_server.llm.accounting: the answering mode and what a prompt shared by n agents costs;
worker_server.llm.distribution.read_requests_at_most: what a read costs), applied here to the
population as it is placed:

- round 1: agents are told apart by what their prompts name (persona, attributes), per worker
  process, counted in SQL as group sizes;
- later rounds: an agent's prompt also carries its own past choices ({history}), so agents who
  shared a prompt split by what they answered. At temperature 0 they answered alike and stay
  together; at temperature > 0 each prompt's answers are taken to spread as ANSWER_DECAY says
  (how a model spreads them depends on it and on the prompt: this is the estimate's one
  assumption), and each prompt they split into costs what its expected number of agents does;
- requests carry batch_size prompts each (the model's smallest), a read's prefixes too.

Prompt tokens come from prompts rendered for a sample of the population's agents, at about four
characters a token (no tokenizer is at hand for every model), growing with the history round by
round. Completion tokens are at most max_tokens an answer and one token a read's prefix.
Retries and extraction calls are not counted; a run that stops early on convergence asks less.
The cost splits a model's requests between its endpoints by their concurrency, as the workers
do, and uses each endpoint's price.
"""

from __future__ import annotations

import math
import statistics
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from functools import lru_cache

from sqlalchemy.ext.asyncio import AsyncSession

from backend.populations import store as population_store
from backend.simulations.config import LlmPolicyConfig, SimulationConfig
from backend.simulations.estimate_plugin import ASSUMPTION as PLUGIN_ASSUMPTION
from backend.simulations.estimate_plugin import plugin_llm_counts
from backend.simulations.mixture import assignment_of, part_counts
from backend.simulations.spec import llm_mode
from backend.simulations.transcripts import DEFAULT_MEMORY, PromptBuilder
from worker_server.llm.accounting import (
    ASK_BEFORE_READING,
    AnsweringMode,
    answering_mode,
    prompt_cost,
)
from worker_server.llm.answering import AnswerSettings
from worker_server.llm.answers import NumberConstraint
from worker_server.llm.distribution import can_read, read_requests_at_most
from worker_server.llm.endpoint_rules import (
    DEFAULT_AGENT_DEADLINE_S,
    DEFAULT_MAX_TOKENS,
    DEFAULT_TOTAL_CONCURRENCY,
)
from worker_server.llm.templates import ROUND_PLACEHOLDERS, Feedback

SAMPLE_AGENTS = 50
CHARS_PER_TOKEN = 4.0
# How a prompt's sampled answers are assumed to spread (module docstring): the likeliest number
# takes 1 - ANSWER_DECAY of them, each next one ANSWER_DECAY times the one before. Whole-number
# answers read from the tests' toy model at T = 0.7 look like that: the likeliest 11-55 %,
# 11-22 numbers above 1 %.
ANSWER_DECAY = 0.8
ASSUMPTION = (
    f"each prompt's answers spread like a sampling model's: the likeliest number "
    f"{1 - ANSWER_DECAY:.0%} of them, each next one {ANSWER_DECAY:.0%} of the one before"
)
MIXED_ASSUMPTION = (
    "the LLM part of the mixed policy holds its share of each group of agents whose prompts "
    "are identical"
)
# Rank sums followed (far past where a prompt still holds more than one agent in 10^9).
_MAX_RANK_SUM = 2000
# A prompt expected to hold fewer agents than this is counted as one agent's own.
_ALONE = 1e-3
# How long a population's prompt groups are reused (placement changes seldom).
KINDS_KEPT_S = 60.0
_KINDS_CACHE: dict[tuple, tuple[float, list]] = {}


@dataclass(frozen=True)
class _Kind:
    """`groups` groups of `agents` agents of one worker process, each group with one round-1
    prompt, answered by one model."""

    worker: int | None
    model: str
    agents: int
    groups: int


def _answer_values(low: float, high: float, integers: bool) -> int:
    """How many different answers the constraint allows (two decimals unless integers)."""
    steps = 1 if integers else 100
    return int(min(max(1.0, math.floor((high - low) * steps) + 1), 10**6))


def _history(rounds: int, tell_mean: bool) -> tuple[list[Feedback], list[float]]:
    """A plausible history of `rounds` rounds."""
    told = [Feedback(r, 33.0, 50.0 if tell_mean else None) for r in range(1, rounds + 1)]
    return told, [40.0] * len(told)


async def estimate(session: AsyncSession, config: SimulationConfig) -> dict:
    try:
        population = await population_store.get_population(session, config.population_id)
    except population_store.UnknownPopulation:
        raise population_store.ConfigPopulationMissing(config.population_id) from None
    policy = config.llm_policy
    # A mixed policy's LLM part asks for its agents alone.
    llm_agents = _llm_agents(config, population)
    out = _no_llm(population.size, llm_agents, config.rounds)
    if policy is None:
        return out
    if config.plays_plugin_round:  # the plugin renders its prompts: counted at most
        return await _plugin_estimate(session, config, policy, llm_agents, out)
    builder = PromptBuilder(config, DEFAULT_MEMORY)
    settings = _answer_settings(config, policy, builder)
    mode = answering_mode(
        policy.temperature, policy.identical_prompts == "each_asks", can_read(settings)
    )
    named = set(builder.system.names) | set(builder.user.names)
    kinds = await _kinds(session, config, policy, named)
    if llm_agents < population.size:
        # Prompt groups of the whole population, each taken at the LLM part's share.
        share = llm_agents / population.size
        kinds = [replace(kind, groups=kind.groups * share) for kind in kinds]
    splits = "history" in named and mode == "exchangeable"
    tokens = await _prompt_tokens(session, config, builder)
    requests, prompt_tokens, completion_tokens = _count_rounds(
        config, policy, settings, mode, kinds, splits, tokens, out
    )
    total_requests = sum(requests.values())
    out.update(
        llm_mode=mode,
        requests=total_requests,
        prompt_tokens=sum(prompt_tokens.values()),
        completion_tokens=sum(completion_tokens.values()),
        prompt_tokens_per_request=(
            round(sum(prompt_tokens.values()) / total_requests) if total_requests else 0
        ),
        distinct_prompts=sum(kind.groups for kind in kinds),
        asks=sum(r["asks"] for r in out["per_round"]),
        reads=sum(r["reads"] for r in out["per_round"]),
        assumption=" ".join(
            text
            for text in (
                ASSUMPTION if splits else None,
                MIXED_ASSUMPTION if llm_agents < population.size else None,
            )
            if text
        )
        or None,
    )
    _endpoints(out, policy, requests, prompt_tokens, completion_tokens)
    return out


def _no_llm(agents: int, llm_agents: int, rounds: int) -> dict:
    """The estimate's shape, for a run that asks no LLM (filled in by the rest)."""
    return {
        "agents": agents,
        "llm_agents": llm_agents,
        "rounds": rounds,
        "llm_mode": None,
        "requests": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "prompt_tokens_per_request": 0,
        "cost_usd": None,
        "distinct_prompts": 0,
        "asks": 0,
        "reads": 0,
        "assumption": None,
        "per_round": [],
        "endpoints": [],
    }


async def _plugin_estimate(
    session: AsyncSession, config: SimulationConfig, policy, llm_agents: int, out: dict
) -> dict:
    """A plugin's round: it renders its prompts, so every LLM agent asks every round."""
    counts = await plugin_llm_counts(session, config, policy, llm_agents)
    total = sum(counts.requests.values())
    out.update(
        llm_mode=llm_mode(config),
        requests=total,
        prompt_tokens=sum(counts.prompt_tokens.values()),
        completion_tokens=sum(counts.completion_tokens.values()),
        prompt_tokens_per_request=round(sum(counts.prompt_tokens.values()) / total) if total else 0,
        asks=llm_agents * config.rounds,
        per_round=counts.per_round,
        assumption=PLUGIN_ASSUMPTION,
    )
    _endpoints(out, policy, counts.requests, counts.prompt_tokens, counts.completion_tokens)
    return out


def _answer_settings(config: SimulationConfig, policy, builder: PromptBuilder) -> AnswerSettings:
    """The settings the workers answer with (what decides the mode and what a read costs)."""
    return AnswerSettings(
        api=policy.api,
        answer_mode=builder.answer_mode,
        max_tokens=policy.max_tokens or DEFAULT_MAX_TOKENS[builder.answer_mode],
        temperature=policy.temperature,
        timeout_s=config.deadlines.agent_s or DEFAULT_AGENT_DEADLINE_S,
        max_retries=policy.max_retries,
        extraction_call=policy.extraction_call,
        constraint=NumberConstraint.for_range(
            config.rule.min, config.rule.max, policy.integer_answers
        ),
    )


def _count_rounds(
    config: SimulationConfig,
    policy,
    settings: AnswerSettings,
    mode: AnsweringMode,
    kinds: list[_Kind],
    splits: bool,
    tokens,
    out: dict,
) -> tuple[Counter[str], Counter[str], Counter[str]]:
    """Requests and tokens per model over the run, each round's counts appended to
    out["per_round"]."""
    values = _answer_values(config.rule.min, config.rule.max, policy.integer_answers)
    batch = {m: _batch_size(policy, m) for m in policy.models_in_use}
    reads_cost = {
        m: read_requests_at_most(settings.constraint, b) if mode == "exchangeable" else (0, 0)
        for m, b in batch.items()
    }
    requests: Counter[str] = Counter()
    prompt_tokens: Counter[str] = Counter()
    completion_tokens: Counter[str] = Counter()
    for round_number in range(1, config.rounds + 1):
        remembered = min(round_number - 1, DEFAULT_MEMORY) if splits else 0
        asks: Counter[tuple[int | None, str]] = Counter()
        reads: Counter[tuple[int | None, str]] = Counter()
        for kind in kinds:
            a, r = _expected_cost(mode, kind.agents, remembered, values)
            asks[kind.worker, kind.model] += a * kind.groups
            reads[kind.worker, kind.model] += r * kind.groups
        round_requests = round_reads = round_asks = 0
        for (worker, model), a in asks.items():
            read_requests, read_nodes = reads_cost[model]
            n_asks, n_reads = round(a), round(reads[worker, model])
            sent = n_asks + n_reads * read_nodes  # prompts, each with the agent's prompt
            cohort_requests = math.ceil(n_asks / batch[model]) + n_reads * read_requests
            requests[model] += cohort_requests
            prompt_tokens[model] += round(sent * tokens(round_number))
            completion_tokens[model] += n_asks * settings.max_tokens + n_reads * read_nodes
            round_requests += cohort_requests
            round_reads += n_reads
            round_asks += n_asks
        out["per_round"].append(
            {"round": round_number, "requests": round_requests, "asks": round_asks,
             "reads": round_reads}
        )  # fmt: skip
    return requests, prompt_tokens, completion_tokens


def _llm_agents(config: SimulationConfig, population) -> int:
    """Agents the LLM plays: all of them, or its part's of a mixed policy (0 without an LLM)."""
    part = config.llm_part
    if part is None:
        return 0
    seed = config.seed or 0  # by share the count is exact whatever the seed
    assignment = assignment_of(config, seed, population.size)
    counts = part_counts(config, assignment, population.size, population.counts or {})
    return counts[config.policy_parts.index(part)]


async def _kinds(
    session: AsyncSession, config: SimulationConfig, policy: LlmPolicyConfig, named: set[str]
) -> list[_Kind]:
    """The population's agents told apart as their round-1 prompts and models tell them apart,
    per worker process (agents share answers within their own process; a process decides
    whether to read a prompt by its own agents' count, and the read itself is made once for the
    cluster, so a prompt read on several processes is counted once per process here: an upper
    bound). The counts are kept a while: a launch form asks again at every change of the config."""
    attributes = sorted(named - ROUND_PLACEHOLDERS)
    models_by = policy.models_by
    label = models_by.attribute if models_by is not None else None
    key = (config.population_id, "persona" in named, tuple(attributes), label)
    cached = _KINDS_CACHE.get(key)
    if cached is not None and time.monotonic() - cached[0] < KINDS_KEPT_S:
        rows = cached[1]
    else:
        rows = await population_store.prompt_group_sizes(
            session, config.population_id, "persona" in named, attributes, label
        )
        _KINDS_CACHE[key] = (time.monotonic(), rows)
        while len(_KINDS_CACHE) > 32:
            del _KINDS_CACHE[next(iter(_KINDS_CACHE))]
    kinds = []
    for worker, category, agents, groups in rows:
        model = policy.default_model
        if models_by is not None and category is not None:
            model = models_by.models.get(category, model)
        kinds.append(_Kind(worker, model, agents, groups))
    return kinds


@lru_cache(maxsize=4096)
def _expected_cost(
    mode: AnsweringMode, agents: int, remembered: int, values: int
) -> tuple[float, float]:
    """Expected (asks, reads) of `agents` agents who shared a prompt in round 1, after their
    own choices in `remembered` rounds split them (accounting.prompt_cost per prompt).

    Each round's answers follow the assumed spread over `values` numbers (ANSWER_DECAY), the
    same for every prompt and round, so the prompt of an agent whose choices had ranks
    i1..ik has probability c^k ANSWER_DECAY^(i1+...+ik): the prompts with rank sum s number
    as many as the ways to write s, and each holds Binomial(agents, that probability)."""
    if remembered == 0 or mode != "exchangeable":
        cost = prompt_cost(mode, agents)
        return float(cost.asks), float(cost.reads)
    decay = ANSWER_DECAY
    norm = (1 - decay) / (1 - decay**values)
    ways = [1.0]  # ways[s]: prompts with rank sum s after the rounds so far
    for _ in range(remembered):
        ways = _spread_once(ways, values, _MAX_RANK_SUM)
    asks = reads = mass = 0.0
    for rank_sum, count in enumerate(ways):
        p = norm**remembered * decay**rank_sum
        if agents * p < _ALONE:  # a prompt of at most one agent: it asks (and costs no more)
            break
        a, r = _binomial_cost(mode, agents, p)
        asks += count * a
        reads += count * r
        mass += count * p
    asks += agents * max(0.0, 1.0 - mass)  # the rest: each agent's prompt is its own
    return asks, reads


def _spread_once(ways: list[float], values: int, longest: int) -> list[float]:
    """Ways to reach each rank sum with one more round's rank in 0..values-1."""
    out = [0.0] * min(len(ways) + values - 1, longest)
    running = 0.0
    for s in range(len(out)):
        running += ways[s] if s < len(ways) else 0.0
        if s - values >= 0 and s - values < len(ways):
            running -= ways[s - values]
        out[s] = running
    return out


def _binomial_cost(mode: AnsweringMode, agents: int, p: float) -> tuple[float, float]:
    """Expected (asks, reads) of one prompt held by Binomial(agents, p) agents. A prompt costs
    the same past ASK_BEFORE_READING agents, so the pmf up to there is all that is needed."""
    if p >= 1.0:
        cost = prompt_cost(mode, agents)
        return float(cost.asks), float(cost.reads)
    log_p, log_q = math.log(p), math.log1p(-p)
    asks = reads = below = 0.0
    for m in range(0, min(agents, ASK_BEFORE_READING) + 1):
        pmf = math.exp(
            math.lgamma(agents + 1) - math.lgamma(m + 1) - math.lgamma(agents - m + 1)
            + m * log_p + (agents - m) * log_q
        )  # fmt: skip
        cost = prompt_cost(mode, m)
        asks += pmf * cost.asks
        reads += pmf * cost.reads
        below += pmf
    cost = prompt_cost(mode, ASK_BEFORE_READING + 1)
    beyond = max(0.0, 1.0 - below)
    return asks + beyond * cost.asks, reads + beyond * cost.reads


async def _prompt_tokens(session: AsyncSession, config: SimulationConfig, builder: PromptBuilder):
    """Round -> tokens of one agent's prompt, as the mean of a sample of agents' prompts in
    rounds 1 and 2, growing by the history's line a round after that."""
    sample = await population_store.sample_agents(session, config.population_id, SAMPLE_AGENTS)
    tell_mean = config.feedback.mean

    def mean_tokens(round_number: int) -> float:
        history, choices = _history(round_number - 1, tell_mean)
        lengths = [
            len(built[0])
            for agent in sample
            if (
                built := builder.render(
                    round_number, dict(agent.attributes), agent.persona, history, choices
                )
            )
        ]
        return statistics.fmean(lengths) / CHARS_PER_TOKEN if lengths else 0.0

    first, second = mean_tokens(1), mean_tokens(2)
    return lambda round_number: first + (second - first) * (round_number - 1)


def _batch_size(policy: LlmPolicyConfig, model: str) -> int:
    """Prompts a request to this model carries: the route's, its endpoints' smallest."""
    return min(e.batch_size_for(policy.api) for e in policy.endpoints if e.model == model)


def _endpoints(
    out: dict,
    policy: LlmPolicyConfig,
    requests: Counter[str],
    prompt_tokens: Counter[str],
    completion_tokens: Counter[str],
) -> None:
    """Each model's requests, split between its endpoints by their concurrency, and priced."""
    caps: dict[str, int] = defaultdict(int)
    for endpoint in policy.endpoints:
        caps[endpoint.model] += _cap(endpoint)
    total = sum(requests.values())
    costs = []
    for endpoint in policy.endpoints:
        model = endpoint.model
        within = _cap(endpoint) / caps[model] if model in policy.models_in_use else 0.0
        cost = None
        if endpoint.price is not None:
            cost = endpoint.price.cost(
                round(prompt_tokens[model] * within), round(completion_tokens[model] * within)
            )
            costs.append(cost)
        out["endpoints"].append(
            {
                "base_url": endpoint.base_url,
                "model": model,
                "share": within * requests[model] / total if total else 0.0,
                "requests": round(requests[model] * within),
                "cost_usd": cost,
            }
        )
    out["cost_usd"] = sum(costs) if costs else None


def _cap(endpoint) -> int:
    return endpoint.max_concurrency or DEFAULT_TOTAL_CONCURRENCY[endpoint.server]
