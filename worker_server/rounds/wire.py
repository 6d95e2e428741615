"""RunRoundRequest in (validated into a RoundSpec), RoundMessage out."""

from __future__ import annotations

import math

import numpy as np

from worker_server.llm.client import LlmClient
from worker_server.llm.endpoint_rules import (
    ANSWER_MODES,
    APIS,
    DEFAULT_AGENT_DEADLINE_S,
    DEFAULT_MAX_TOKENS,
    MAX_RETRIES,
    MAX_ROUND_DEADLINE_S,
    MAX_TEMPERATURE,
    MAX_TOKENS,
)
from worker_server.llm.shared_reads import ReadPeer, RoundReads, SharedReads
from worker_server.llm.spec import InvalidLlmRequest, endpoint_specs, positive_seconds
from worker_server.llm.templates import Feedback
from worker_server.llm.usage import usage_message
from worker_server.rounds.aggregate import DEFAULT_BINS, MAX_BINS, PartialAggregate
from worker_server.rounds.assignment import AttributeAssignment, ShareAssignment
from worker_server.rounds.decision_batch import fill_batch
from worker_server.rounds.errors import InvalidRound
from worker_server.rounds.llm import LlmPolicy
from worker_server.rounds.mixed import MixedPolicy
from worker_server.rounds.network import MAX_PEERS, NetworkRound, NetworkStates, placement_from
from worker_server.rounds.plugin_round import PluginRound, plugin_policy, plugin_round
from worker_server.rounds.policies import GameRule, LevelKPolicy, Policy, SyntheticPolicy
from worker_server.rounds.subenv import (
    DEFAULT_BATCH_SIZE,
    MAX_BATCH_SIZE,
    DecisionChunk,
    RoundSpec,
)
from worker_server.rpc import worker_pb2 as pb


def llm_policy(
    llm: pb.LlmPolicy, client: LlmClient, played: PluginRound | None = None
) -> LlmPolicy:
    """Validate an LlmPolicy message (InvalidRound naming the field) and fill in defaults. In a
    plugin's round the plugin renders the prompts: the templates must be empty."""
    try:
        endpoints = endpoint_specs(llm.endpoints, "llm.endpoints", client.access)
        timeout_s = positive_seconds(
            llm.request_timeout_s, DEFAULT_AGENT_DEADLINE_S, "llm.request_timeout_s"
        )
    except InvalidLlmRequest as exc:
        raise InvalidRound(str(exc)) from None
    if llm.api not in APIS:
        raise InvalidRound(f"llm.api must be chat or completions, got {llm.api!r}")
    if llm.api != "completions":
        for i, endpoint in enumerate(endpoints):
            if endpoint.batch_size > 1:
                raise InvalidRound(
                    f"llm.endpoints[{i}].batch_size must be 1 with the chat API (a chat "
                    "request carries one conversation; prompt arrays need completions)"
                )
    if llm.answer_mode not in ANSWER_MODES:
        raise InvalidRound(f"llm.answer_mode must be basic or cot, got {llm.answer_mode!r}")
    _check_prompts(llm, played)
    _check_models(llm, endpoints)
    default_tokens = DEFAULT_MAX_TOKENS[llm.answer_mode]
    if not 0 <= llm.max_tokens <= MAX_TOKENS:
        raise InvalidRound(
            f"llm.max_tokens must be in 0..{MAX_TOKENS} (0 means {default_tokens}), "
            f"got {llm.max_tokens}"
        )
    if not (math.isfinite(llm.temperature) and 0 <= llm.temperature <= MAX_TEMPERATURE):
        raise InvalidRound(f"llm.temperature must be in [0, {MAX_TEMPERATURE:g}]")
    if not 0 <= llm.max_retries <= MAX_RETRIES:
        raise InvalidRound(f"llm.max_retries must be in 0..{MAX_RETRIES}, got {llm.max_retries}")
    return LlmPolicy(
        endpoints=endpoints,
        default_model=llm.default_model,
        model_attribute=llm.model_attribute,
        model_by_category=dict(llm.model_by_category),
        system_template=llm.system_template,
        user_template=llm.user_template,
        api=llm.api,
        answer_mode=llm.answer_mode,
        max_tokens=llm.max_tokens or default_tokens,
        temperature=llm.temperature,
        request_timeout_s=timeout_s,
        max_retries=llm.max_retries,
        extraction_call=llm.extraction_call,
        each_agent_asks=llm.each_agent_asks,
        integer_answers=llm.integer_answers,
        client=client,
        plugin=played,
    )


def _check_prompts(llm: pb.LlmPolicy, played: PluginRound | None) -> None:
    """The templates: the game's own, or none in a plugin's round (the plugin renders them)."""
    if played is not None:
        if llm.system_template or llm.user_template or llm.integer_answers:
            raise InvalidRound(
                "llm: in a plugin's round the plugin renders the prompts and its action's type "
                "gives the answer (no templates, no integer_answers)"
            )
        if llm.answer_mode != "basic":
            raise InvalidRound("llm.answer_mode must be basic in a plugin's round")
    elif not llm.user_template.strip():
        raise InvalidRound("llm.user_template must not be empty")


def _check_models(llm: pb.LlmPolicy, endpoints) -> None:
    """Every model the policy names is served by an endpoint."""
    served = sorted({e.model for e in endpoints})
    if not llm.default_model:
        raise InvalidRound("llm.default_model must not be empty")
    wanted = {"llm.default_model": llm.default_model}
    wanted |= {f"llm.model_by_category[{c!r}]": m for c, m in llm.model_by_category.items()}
    for name, model in wanted.items():
        if model not in served:
            raise InvalidRound(
                f"{name}: model {model!r} is not served by any endpoint "
                f"(served: {', '.join(served)})"
            )
    if llm.model_by_category and not llm.model_attribute:
        raise InvalidRound("llm.model_by_category needs llm.model_attribute")


def policy_from_proto(
    policy: pb.Policy, llm_client: LlmClient | None = None, played: PluginRound | None = None
) -> Policy:
    kind = policy.WhichOneof("kind")
    if kind == "plugin":
        return plugin_policy(policy.plugin, played)
    if kind == "synthetic":
        return SyntheticPolicy(latency_s=policy.synthetic.latency_s)
    if kind == "level_k":
        level_k = policy.level_k
        return LevelKPolicy(
            depth_attribute=level_k.depth_attribute,
            depth_by_category=dict(level_k.depth_by_category),
            default_depth=level_k.default_depth,
            noise_std=level_k.noise_std,
        )
    if kind == "llm":
        if llm_client is None:
            raise InvalidRound("policy: 'llm' needs the process's LLM client")
        return llm_policy(policy.llm, llm_client, played)
    if kind == "mixed":
        return mixed_policy(policy.mixed, llm_client, played)
    if kind is None:
        raise InvalidRound("policy: not set (one of: synthetic, level_k, llm, plugin, mixed)")
    raise InvalidRound(f"policy: {kind!r} is not supported by this worker")


def mixed_policy(
    mixed: pb.MixedPolicy, llm_client: LlmClient | None, played: PluginRound | None
) -> MixedPolicy:
    """Validate a MixedPolicy message: its parts (none mixed itself) and its assignment."""
    if not mixed.parts:
        raise InvalidRound("policy.mixed.parts: at least one part")
    parts = []
    for i, part in enumerate(mixed.parts):
        kind = part.policy.WhichOneof("kind")
        if kind == "mixed":
            raise InvalidRound(f"policy.mixed.parts[{i}].policy: a mixed policy cannot nest")
        _check_played_by(kind, played, f"policy.mixed.parts[{i}].policy")
        parts.append(policy_from_proto(part.policy, llm_client, played))
    labels = [part.label for part in mixed.parts]
    if len(set(labels)) != len(labels) or not all(labels):
        raise InvalidRound("policy.mixed.parts: each part needs a label of its own")
    if mixed.attribute:
        by_category, defaults = {}, []
        for i, part in enumerate(mixed.parts):
            if not part.categories:
                defaults.append(i)
            for category in part.categories:
                if category in by_category:
                    raise InvalidRound(f"policy.mixed.parts[{i}].categories: {category!r} twice")
                by_category[category] = i
        if len(defaults) != 1:
            raise InvalidRound("policy.mixed.parts: exactly one part without categories")
        assignment = AttributeAssignment(mixed.attribute, by_category, defaults[0])
    else:
        assignment = ShareAssignment(
            mixed.population_size,
            mixed.multiplier,
            mixed.offset,
            tuple(part.bound for part in mixed.parts),
        )
        problem = assignment.check()
        if problem is not None:
            raise InvalidRound(f"policy.mixed: {problem}")
    return MixedPolicy(parts, labels, assignment)


def _check_played_by(kind: str | None, played: PluginRound | None, where: str) -> None:
    """A plugin's round is played by its own policies, or the LLM where the plugin lists it."""
    if played is not None and not (kind == "plugin" or (kind == "llm" and played.plays_llm)):
        raise InvalidRound(
            f"{where}: a plugin's round is played by one of its own policies, or by the LLM "
            "where the plugin lists it"
        )


def round_spec(
    request: pb.RunRoundRequest,
    llm_client: LlmClient | None = None,
    network_states: NetworkStates | None = None,
    shared_reads: SharedReads | None = None,
) -> RoundSpec:
    """Validate a request into a RoundSpec (raises InvalidRound naming the field)."""
    _check_identity(request)
    rule = GameRule(request.rule.ratio, request.rule.offset, request.rule.min, request.rule.max)
    feedback = request.feedback if request.HasField("feedback") else None
    if feedback is not None and not math.isfinite(feedback):
        raise InvalidRound("feedback must be finite")
    bins, batch_size, deadline = _limits(request)
    segment_by = tuple(request.segment_by)
    if len(set(segment_by)) != len(segment_by):
        raise InvalidRound("segment_by names an attribute twice")
    # Set (even empty): only these agents act. Sorted and unique, for binary searches.
    only = None
    if request.HasField("only"):
        only = np.unique(np.asarray(request.only.ids, dtype=np.int64))
    network = _network_round(request, network_states)
    played = plugin_round(request.plugin, network) if request.HasField("plugin") else None
    kind = request.policy.WhichOneof("kind")
    if kind != "mixed":  # a mixed policy's parts are checked one by one
        _check_played_by(kind, played, "policy")
    if played is not None and (rule.min, rule.max) != played.range:
        raise InvalidRound(
            f"rule: min and max must be the plugin's action range {played.range}, not "
            f"{(rule.min, rule.max)}"
        )
    return RoundSpec(
        round_id=request.round_id,
        population_id=request.population_id,
        round=request.round,
        rule=rule,
        policy=policy_from_proto(request.policy, llm_client, played),
        feedback=feedback,
        segment_by=segment_by,
        bins=bins,
        seed=request.seed,
        batch_size=batch_size,
        deadline_s=deadline,
        simulation_id=request.simulation_id,
        history=_history(request),
        store_responses=request.store_responses,
        only=only,
        valid=played.valid if played is not None else None,
        on_complete=network.complete if network is not None else None,
        reads=_round_reads(request, shared_reads),
    )


def _check_identity(request: pb.RunRoundRequest) -> None:
    """Which round of which population under which rule: all must be there."""
    if not request.round_id:
        raise InvalidRound("round_id must not be empty")
    if not request.population_id:
        raise InvalidRound("population_id must not be empty")
    if request.round < 1:
        raise InvalidRound(f"round is 1-based, got {request.round}")
    if not request.HasField("rule"):
        raise InvalidRound("rule must be set")


def _limits(request: pb.RunRoundRequest) -> tuple[int, int, float]:
    """The histogram's bins, decisions per message and the round's deadline, checked."""
    bins = request.histogram_bins or DEFAULT_BINS
    if not 1 <= bins <= MAX_BINS:
        raise InvalidRound(f"histogram_bins must be in 1..{MAX_BINS} (0 means {DEFAULT_BINS})")
    if request.batch_size < 0 or request.batch_size > MAX_BATCH_SIZE:
        raise InvalidRound(f"batch_size must be in 0..{MAX_BATCH_SIZE} (0 means the minimum)")
    # Fewer than the minimum per message is never useful: raise it to the minimum.
    batch_size = max(request.batch_size, DEFAULT_BATCH_SIZE)
    deadline = request.deadline_s
    if not (math.isfinite(deadline) and 0 <= deadline <= MAX_ROUND_DEADLINE_S):
        raise InvalidRound(f"deadline_s must be in [0, {MAX_ROUND_DEADLINE_S:g}] (0 means none)")
    return bins, batch_size, deadline


def _history(request: pb.RunRoundRequest) -> tuple[Feedback, ...]:
    history = []
    for i, past in enumerate(request.history):
        mean = past.mean if past.HasField("mean") else None
        if not math.isfinite(past.winner) or (mean is not None and not math.isfinite(mean)):
            raise InvalidRound(f"history[{i}]: winner and mean must be finite")
        history.append(Feedback(past.round, past.winner, mean))
    return tuple(history)


def _network_round(
    request: pb.RunRoundRequest, network_states: NetworkStates | None
) -> NetworkRound | None:
    if not request.HasField("network"):
        return None
    if network_states is None or not request.HasField("plugin"):
        raise InvalidRound("network: only a network simulation's round carries it")
    return NetworkRound(
        network_states,
        placement_from(request.network),
        request.simulation_id,
        request.round,
        seed=request.seed,
    )


def _round_reads(request: pb.RunRoundRequest, exchange: SharedReads | None) -> RoundReads | None:
    """Where the round's exchangeable agents get their distributions read (shared_reads: the
    round's processes, each prompt read by one of them; unset: this process alone)."""
    if exchange is None:
        return None
    key = (request.simulation_id or request.round_id, request.round)
    if not request.HasField("shared_reads"):
        return RoundReads(exchange, key)
    message = request.shared_reads
    if not 0 < len(message.peers) <= MAX_PEERS:
        raise InvalidRound(f"shared_reads.peers: 1..{MAX_PEERS} peers, not {len(message.peers)}")
    if not 0 <= message.self < len(message.peers):
        raise InvalidRound(
            f"shared_reads.self: an index into shared_reads.peers, not {message.self}"
        )
    peers = []
    for i, peer in enumerate(message.peers):
        if not peer.address or not peer.credential:
            raise InvalidRound(f"shared_reads.peers[{i}]: address and credential must be set")
        peers.append(ReadPeer(peer.worker_id, peer.address, peer.credential, peer.tls))
    return RoundReads(exchange, key, tuple(peers), message.self)


def decisions_message(chunk: DecisionChunk, packed: bool = False) -> pb.RoundMessage:
    batch = pb.DecisionBatch(
        responses=chunk.responses or (),
        invalid_responses=chunk.invalid_responses or (),
        endpoints=[usage_message(e) for e in chunk.endpoints],
    )
    fill_batch(batch, chunk.ids, chunk.values, chunk.invalid_ids, chunk.late_ids, packed)
    return pb.RoundMessage(decisions=batch)


def aggregate_message(aggregate: PartialAggregate) -> pb.RoundMessage:
    return pb.RoundMessage(
        aggregate=pb.PartialAggregate(
            count=aggregate.count,
            sum=aggregate.sum,
            sum_sq=aggregate.sum_sq,
            min=aggregate.min,
            max=aggregate.max,
            histogram=aggregate.histogram.tolist(),
            segments=[
                pb.SegmentAggregate(
                    attribute=s.attribute,
                    category=s.category,
                    count=s.count,
                    sum=s.sum,
                    sum_sq=s.sum_sq,
                )
                for s in aggregate.segments
            ],
            n_invalid=aggregate.n_invalid,
            n_late=aggregate.n_late,
            elapsed_s=aggregate.elapsed_s,
            prompt_tokens=aggregate.prompt_tokens,
            cached_tokens=aggregate.cached_tokens,
            completion_tokens=aggregate.completion_tokens,
            llm_errors=aggregate.llm_errors,
            network_bytes=aggregate.network_bytes,
            endpoints=[usage_message(e) for e in aggregate.endpoints],
        )
    )
