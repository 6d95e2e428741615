"""RunRoundRequest in (validated into a RoundSpec), RoundMessage out."""

from __future__ import annotations

import math

from worker_server.rounds.aggregate import DEFAULT_BINS, MAX_BINS, PartialAggregate
from worker_server.rounds.errors import InvalidRound
from worker_server.rounds.policies import GameRule, LevelKPolicy, Policy, SyntheticPolicy
from worker_server.rounds.subenv import (
    DEFAULT_BATCH_SIZE,
    MAX_BATCH_SIZE,
    DecisionChunk,
    RoundSpec,
)
from worker_server.rpc import worker_pb2 as pb

MAX_DEADLINE_S = 7 * 24 * 3600.0


def policy_from_proto(policy: pb.Policy) -> Policy:
    kind = policy.WhichOneof("kind")
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
    # The LLM policy arrives with the simulation engine (Policy.llm = 3).
    if kind is None:
        raise InvalidRound("policy: not set (one of: synthetic, level_k)")
    raise InvalidRound(f"policy: {kind!r} is not supported by this worker")


def round_spec(request: pb.RunRoundRequest) -> RoundSpec:
    """Validate a request into a RoundSpec (raises InvalidRound naming the field)."""
    if not request.round_id:
        raise InvalidRound("round_id must not be empty")
    if not request.population_id:
        raise InvalidRound("population_id must not be empty")
    if request.round < 1:
        raise InvalidRound(f"round is 1-based, got {request.round}")
    if not request.HasField("rule"):
        raise InvalidRound("rule must be set")
    rule = GameRule(request.rule.ratio, request.rule.offset, request.rule.min, request.rule.max)
    feedback = request.feedback if request.HasField("feedback") else None
    if feedback is not None and not math.isfinite(feedback):
        raise InvalidRound("feedback must be finite")
    bins = request.histogram_bins or DEFAULT_BINS
    if not 1 <= bins <= MAX_BINS:
        raise InvalidRound(f"histogram_bins must be in 1..{MAX_BINS} (0 means {DEFAULT_BINS})")
    if request.batch_size < 0 or request.batch_size > MAX_BATCH_SIZE:
        raise InvalidRound(f"batch_size must be in 0..{MAX_BATCH_SIZE} (0 means the minimum)")
    # Fewer than the minimum per message is never useful: raise it to the minimum.
    batch_size = max(request.batch_size, DEFAULT_BATCH_SIZE)
    deadline = request.deadline_s
    if not (math.isfinite(deadline) and 0 <= deadline <= MAX_DEADLINE_S):
        raise InvalidRound(f"deadline_s must be in [0, {MAX_DEADLINE_S:g}] (0 means none)")
    segment_by = tuple(request.segment_by)
    if len(set(segment_by)) != len(segment_by):
        raise InvalidRound("segment_by names an attribute twice")
    return RoundSpec(
        round_id=request.round_id,
        population_id=request.population_id,
        round=request.round,
        rule=rule,
        policy=policy_from_proto(request.policy),
        feedback=feedback,
        segment_by=segment_by,
        bins=bins,
        seed=request.seed,
        batch_size=batch_size,
        deadline_s=deadline,
    )


def decisions_message(chunk: DecisionChunk) -> pb.RoundMessage:
    return pb.RoundMessage(
        decisions=pb.DecisionBatch(
            agent_ids=chunk.ids.tolist(),
            values=chunk.values.tolist(),
            invalid_ids=chunk.invalid_ids.tolist(),
            late_ids=chunk.late_ids.tolist(),
        )
    )


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
        )
    )
