"""What an LLM run of a plugin (other than the guessing game) will ask, before it runs.

The plugin renders every prompt (populace.plugin.Simulation.render), from the agent's persona
and attributes and from what its group heard last round. Which agents' prompts will be
identical after round 1 (and so share an answer at temperature 0, or one read of the answer
distribution) depends on how the groups play, which cannot be known before the run. So this
counts the most the run can ask: every agent asks every round, in the endpoints' batches, on the
default model (with models_by, agents are spread over models; the total stays). Prompt tokens
are the plugin's own prompts rendered for a sample of the population's agents, at about four
characters a token.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncSession

from backend.populations import store as population_store
from backend.simulations.config import LlmPolicyConfig, SimulationConfig
from populace.plugin import AgentView
from populace.registry import installed
from worker_server.llm.endpoint_rules import DEFAULT_MAX_TOKENS
from worker_server.llm.protocol import completion_prompt

SAMPLE_AGENTS = 50
CHARS_PER_TOKEN = 4.0
ASSUMPTION = (
    "at most: every agent asks every round. The plugin's prompts carry what each group heard "
    "last round, so which agents share a prompt (and an answer) is only known as the run plays"
)


@dataclass
class PluginCounts:
    requests: Counter[str] = field(default_factory=Counter)
    prompt_tokens: Counter[str] = field(default_factory=Counter)
    completion_tokens: Counter[str] = field(default_factory=Counter)
    per_round: list[dict] = field(default_factory=list)


async def plugin_llm_counts(
    session: AsyncSession, config: SimulationConfig, policy: LlmPolicyConfig, agents: int
) -> PluginCounts:
    simulation = installed().get(config.plugin.name).simulation
    sample = await population_store.sample_agents(session, config.population_id, SAMPLE_AGENTS)
    # A network simulation's prompt shows the agent's value and its neighbours': as many as it
    # ever shows, for an estimate that is "at most".
    heard = {}
    if simulation.network:
        shown = max(0, int(type(simulation).prompt_neighbours))
        heard = {"previous": 0.5, "neighbours": (0.5,) * shown}

    def chars(agent) -> int:
        view = AgentView(
            round=2 if heard else 1,
            persona=agent.persona or "",
            attributes={k: "" if v is None else str(v) for k, v in agent.attributes.items()},
            feedback={},
            group={},
            **heard,
        )
        prompt = simulation.render(config.params, view)
        if policy.api == "completions":
            return len(completion_prompt(prompt.system, prompt.user))
        return len(prompt.system) + len(prompt.user)

    tokens = statistics.fmean(chars(a) for a in sample) / CHARS_PER_TOKEN if sample else 0.0
    max_tokens = policy.max_tokens or DEFAULT_MAX_TOKENS["basic"]
    counts = PluginCounts()
    models = policy.models_in_use
    model = policy.default_model if policy.default_model in models else models[0]
    batch = min(e.batch_size_for(policy.api) for e in policy.endpoints if e.model == model)
    for round_number in range(1, config.rounds + 1):
        requests = math.ceil(agents / batch)
        counts.requests[model] += requests
        counts.prompt_tokens[model] += round(agents * tokens)
        counts.completion_tokens[model] += agents * max_tokens
        counts.per_round.append(
            {"round": round_number, "requests": requests, "asks": agents, "reads": 0}
        )
    return counts
