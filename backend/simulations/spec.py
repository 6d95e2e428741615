"""A validated SimulationConfig turned into what the rounds send to the workers (protobuf)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from backend.simulations import prompts
from backend.simulations.config import (
    LevelKPolicyConfig,
    LlmPolicyConfig,
    MixedPolicyConfig,
    PluginPolicyConfig,
    SimulationConfig,
    SyntheticPolicyConfig,
)
from backend.simulations.mixture import assignment_of
from populace.registry import installed
from worker_server.llm.endpoint_rules import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_TOTAL_CONCURRENCY,
    normalise_base_url,
)
from worker_server.rounds.assignment import Assignment, ShareAssignment
from worker_server.rpc import worker_pb2 as pb

# Gap between the round's deadline on the workers and giving up on their stream: the worker
# closes a round at its deadline by itself, then still streams the rest and its aggregate.
STREAM_GRACE_S = 30.0
PROBE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class GameSpec:
    """Everything the global environment needs to run the rounds of one simulation."""

    simulation_id: int
    population_id: int
    rounds: int
    # The guessing game's rule; for another plugin, only min and max: the action's range.
    rule: pb.GameRule
    policy: pb.Policy
    seed: int
    segment_by: tuple[str, ...] = ()
    # The attribute whose categories are the groups (None: a network's components).
    group_by: str | None = None
    histogram_bins: int = 101
    store_responses: bool = False
    round_deadline_s: float | None = None
    converge_window: int | None = None
    converge_tolerance: float | None = None
    # The declared metric the convergence rule watches.
    converge_metric: str | None = None
    allow_partial: bool = False
    # (base_url, model) -> USD per million prompt and completion tokens (the meters' costs).
    prices: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)
    # The simulation plugin that resolves each round, by its registered name, and its params.
    plugin: str = "guess"
    params: Any = None
    # Set when rounds go to the workers as the plugin's (RunRoundRequest.plugin; every plugin
    # but the guessing game): the plugin's version, which every worker must have.
    plugin_version: str | None = None
    # A mixed policy's parts, by label, and who plays which (None: one policy for all).
    policy_labels: tuple[str, ...] = ()
    assignment: Assignment | None = None
    # Rounds keep only the decisions that changed (simulations.stores_changes, decided at
    # launch and stored with the run: backend.simulations.carried).
    stores_changes: bool = False

    @property
    def uses_llm(self) -> bool:
        return llm_message(self.policy) is not None

    @property
    def stream_timeout_s(self) -> float | None:
        return None if self.round_deadline_s is None else self.round_deadline_s + STREAM_GRACE_S

    def endpoints(self) -> list[pb.LlmEndpoint]:
        llm = llm_message(self.policy)
        return list(llm.endpoints) if llm is not None else []


def llm_message(policy: pb.Policy) -> pb.LlmPolicy | None:
    """The LLM policy a round's policy message holds: itself, or a mixed policy's LLM part."""
    kind = policy.WhichOneof("kind")
    if kind == "llm":
        return policy.llm
    if kind == "mixed":
        return next(
            (llm_message(p.policy) for p in policy.mixed.parts if p.policy.HasField("llm")), None
        )
    return None


# A plugin's LLM agents answer its rendered prompts (populace.plugin.Simulation.render) with
# the answer alone: the constraint gives the action's type.
PLUGIN_PROMPTS = prompts.Prompts(system="", user="", answer_mode="basic")


def llm_prompts(config: SimulationConfig) -> prompts.Prompts:
    """The guessing game's prompt templates, or none for a plugin that renders its own."""
    if config.plays_plugin_round:
        return PLUGIN_PROMPTS
    policy = config.llm_policy
    integers = policy is not None and policy.integer_answers
    return prompts.build(config.prompt, config.rule, integers=integers)


def llm_policy(config: SimulationConfig, policy: LlmPolicyConfig) -> pb.LlmPolicy:
    texts = llm_prompts(config)
    return pb.LlmPolicy(
        endpoints=[
            pb.LlmEndpoint(
                base_url=e.base_url,
                model=e.model,
                # The total; each worker is sent its share (per_worker_requests).
                max_concurrency=e.max_concurrency or DEFAULT_TOTAL_CONCURRENCY[e.server],
                api_key_env=e.api_key_env or "",
                server=e.server,
                batch_size=e.batch_size_for(policy.api),
            )
            for e in policy.endpoints
        ],
        default_model=policy.default_model,
        model_attribute=policy.models_by.attribute if policy.models_by else "",
        model_by_category=dict(policy.models_by.models) if policy.models_by else {},
        system_template=texts.system,
        user_template=texts.user,
        api=policy.api,
        answer_mode=texts.answer_mode,
        max_tokens=policy.max_tokens or DEFAULT_MAX_TOKENS[texts.answer_mode],
        temperature=policy.temperature,
        request_timeout_s=config.deadlines.agent_s,
        max_retries=policy.max_retries,
        extraction_call=policy.extraction_call,
        each_agent_asks=policy.identical_prompts == "each_asks",
        integer_answers=policy.integer_answers,
    )


def split_total(total: int, parts: int) -> list[int]:
    """`total` over `parts` as evenly as possible, at least 1 each (so with more parts than the
    total, the total is exceeded: a worker with agents must be able to ask)."""
    base, extra = divmod(total, parts)
    return [max(1, base + (1 if i < extra else 0)) for i in range(parts)]


def per_worker_requests(
    request: pb.RunRoundRequest, addresses: list[str]
) -> dict[str, pb.RunRoundRequest]:
    """The round's request for each worker: an LLM endpoint's max_concurrency is a total over
    the workers taking part, so each is sent its share (the endpoint sees the total, however
    many processes the agents are spread over)."""
    llm = llm_message(request.policy)
    if llm is None or len(addresses) < 2:
        return {address: request for address in addresses}
    totals = [e.max_concurrency for e in llm.endpoints]
    shares = [split_total(total, len(addresses)) for total in totals]
    out = {}
    for i, address in enumerate(addresses):
        own = pb.RunRoundRequest()
        own.CopyFrom(request)
        own_llm = llm_message(own.policy)
        for endpoint, endpoint_shares in zip(own_llm.endpoints, shares, strict=True):
            endpoint.max_concurrency = endpoint_shares[i]
        out[address] = own
    return out


def policy_proto(config: SimulationConfig, seed: int = 0, population_size: int = 0) -> pb.Policy:
    """The run's policy as the workers take it; a mixed one with its assignment (by share,
    from the seed over the population's size)."""
    if not isinstance(config.policy, MixedPolicyConfig):
        return one_policy_proto(config, config.policy)
    parts = [
        pb.MixedPart(
            label=part.label,
            policy=one_policy_proto(config, part.policy),
            categories=part.categories,
        )
        for part in config.policy_parts
    ]
    assignment = assignment_of(config, seed, population_size)
    mixed = pb.MixedPolicy(parts=parts)
    if isinstance(assignment, ShareAssignment):
        for part, bound in zip(mixed.parts, assignment.bounds, strict=True):
            part.bound = bound
        mixed.population_size = assignment.n
        mixed.multiplier = assignment.multiplier
        mixed.offset = assignment.offset
    else:
        mixed.attribute = config.policy.attribute
    return pb.Policy(mixed=mixed)


def one_policy_proto(config: SimulationConfig, policy) -> pb.Policy:
    if isinstance(policy, LlmPolicyConfig):
        return pb.Policy(llm=llm_policy(config, policy))
    if isinstance(policy, LevelKPolicyConfig):
        return pb.Policy(
            level_k=pb.LevelKPolicy(
                depth_attribute=policy.depth_attribute or "",
                depth_by_category=policy.depth_by_category,
                default_depth=policy.default_depth,
                noise_std=policy.noise_std,
            )
        )
    if isinstance(policy, PluginPolicyConfig):
        params = json.dumps(policy.params, separators=(",", ":"))
        return pb.Policy(plugin=pb.PluginPolicy(name=policy.kind, params_json=params))
    assert isinstance(policy, SyntheticPolicyConfig)
    return pb.Policy(synthetic=pb.SyntheticPolicy(latency_s=policy.latency_s))


def models_in_use(config: SimulationConfig) -> list[str]:
    return config.llm_policy.models_in_use if config.llm_policy is not None else []


def llm_mode(config: SimulationConfig) -> str | None:
    """How an LLM run's agents are answered (per_agent, shared or exchangeable); None when
    the policy is not an LLM."""
    if config.llm_policy is None:
        return None
    return config.llm_policy.answering_mode(llm_prompts(config).answer_mode)


def game_spec(
    config: SimulationConfig,
    simulation_id: int,
    seed: int,
    population_size: int = 0,
    *,
    stores_changes: bool = False,
) -> GameSpec:
    converge = config.stop_when_converged
    plugin = installed().get(config.plugin.name)
    plugin_version = None
    if config.plays_plugin_round:
        low, high = plugin.simulation.action(config.params).range
        rule = pb.GameRule(min=low, max=high)
        plugin_version = plugin.version
    else:
        ratio, offset = config.rule.resolved
        rule = pb.GameRule(ratio=ratio, offset=offset, min=config.rule.min, max=config.rule.max)
    return GameSpec(
        simulation_id=simulation_id,
        population_id=config.population_id,
        rounds=config.rounds,
        rule=rule,
        policy=policy_proto(config, seed, population_size),
        seed=seed,
        segment_by=tuple(config.segment_by),
        group_by=config.group_by,
        histogram_bins=config.histogram_bins,
        store_responses=config.store_responses,
        round_deadline_s=config.deadlines.round_s,
        converge_window=converge.window if converge else None,
        converge_tolerance=converge.tolerance if converge else None,
        converge_metric=config.convergence_metric,
        allow_partial=config.allow_partial,
        prices=prices_of(config),
        plugin=config.plugin.name,
        params=config.params,
        plugin_version=plugin_version,
        policy_labels=tuple(p.label for p in config.policy_parts),
        assignment=assignment_of(config, seed, population_size),
        stores_changes=stores_changes,
    )


def stored_prices(config: dict) -> dict[tuple[str, str], tuple[float, float]]:
    """The prices of a stored config ({} when it no longer validates: an older version's)."""
    try:
        return prices_of(SimulationConfig.model_validate(config))
    except ValidationError:
        return {}


def prices_of(config: SimulationConfig) -> dict[tuple[str, str], tuple[float, float]]:
    """Each priced endpoint's prices, by (base_url, model)."""
    policy = config.llm_policy
    if policy is None:
        return {}
    # Keyed as the workers report usage: by the normalised URL (no trailing / or /v1).
    return {
        (normalise_base_url(e.base_url, "base_url"), e.model): (
            e.price.prompt_per_million,
            e.price.completion_per_million,
        )
        for e in policy.endpoints
        if e.price is not None
    }
