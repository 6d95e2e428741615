"""What an LLM run will ask before it is launched: requests, tokens and cost, as an upper bound.

agents × rounds requests (fewer when agents with identical prompts share one, which is not
counted here); prompt tokens from prompts rendered for a sample of the population's agents with
a history as long as the run's middle round, at about four characters a token (no tokenizer is
at hand for every model); completion tokens at max_tokens. The cost splits requests between a
model's endpoints by their concurrency, as the workers do, and uses each endpoint's price.
"""

from __future__ import annotations

import statistics

from sqlalchemy.ext.asyncio import AsyncSession

from backend.populations import store as population_store
from backend.simulations.config import LlmPolicyConfig, SimulationConfig
from backend.simulations.spec import llm_mode
from backend.simulations.transcripts import DEFAULT_MEMORY, PromptBuilder
from worker_server.llm.endpoint_rules import DEFAULT_MAX_TOKENS, DEFAULT_TOTAL_CONCURRENCY
from worker_server.llm.templates import Feedback

SAMPLE_AGENTS = 50
CHARS_PER_TOKEN = 4.0


def _history(rounds: int, tell_mean: bool) -> tuple[list[Feedback], list[float]]:
    """A typical history: as long as the middle round's, plausible numbers."""
    told = [Feedback(r, 33.0, 50.0 if tell_mean else None) for r in range(1, rounds // 2 + 1)]
    return told, [40.0] * len(told)


async def estimate(session: AsyncSession, config: SimulationConfig) -> dict:
    try:
        population = await population_store.get_population(session, config.population_id)
    except population_store.UnknownPopulation:
        raise population_store.ConfigPopulationMissing(config.population_id) from None
    agents = population.size
    policy = config.policy
    out: dict = {
        "agents": agents,
        "rounds": config.rounds,
        "llm_mode": llm_mode(config),
        "requests": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "prompt_tokens_per_request": 0,
        "cost_usd": None,
        "endpoints": [],
    }
    if not isinstance(policy, LlmPolicyConfig):
        return out
    sample = await population_store.sample_agents(session, config.population_id, SAMPLE_AGENTS)
    builder = PromptBuilder(config, DEFAULT_MEMORY)
    history, choices = _history(config.rounds, config.feedback.mean)
    mid = max(1, config.rounds // 2 + 1)
    lengths = [
        len(built[0])
        for agent in sample
        if (built := builder.render(mid, dict(agent.attributes), agent.persona, history, choices))
    ]
    per_prompt = round(statistics.fmean(lengths) / CHARS_PER_TOKEN) if lengths else 0
    requests = agents * config.rounds
    answer_mode = builder.answer_mode if builder.llm else "basic"
    per_completion = policy.max_tokens or DEFAULT_MAX_TOKENS[answer_mode]
    out.update(
        requests=requests,
        prompt_tokens_per_request=per_prompt,
        prompt_tokens=requests * per_prompt,
        completion_tokens=requests * per_completion,
    )
    # Each model's requests, split between its endpoints by their concurrency.
    models = policy.models_in_use
    shares = []
    for endpoint in policy.endpoints:
        peers = [e for e in policy.endpoints if e.model == endpoint.model]
        caps = [e.max_concurrency or DEFAULT_TOTAL_CONCURRENCY[e.server] for e in peers]
        cap = endpoint.max_concurrency or DEFAULT_TOTAL_CONCURRENCY[endpoint.server]
        in_use = endpoint.model in models
        share = (cap / sum(caps)) / len(models) if in_use else 0.0
        shares.append((endpoint, share))
    costs = []
    for endpoint, share in shares:
        cost = None
        if endpoint.price is not None:
            cost = endpoint.price.cost(
                round(out["prompt_tokens"] * share), round(out["completion_tokens"] * share)
            )
            costs.append(cost)
        out["endpoints"].append(
            {
                "base_url": endpoint.base_url,
                "model": endpoint.model,
                "share": share,
                "requests": round(requests * share),
                "cost_usd": cost,
            }
        )
    out["cost_usd"] = sum(costs) if costs else None
    return out
