"""One round's outcome from the decisions that streamed back.

The decisions are collected as numpy columns while the round runs (never one object per agent),
then sorted by agent id. What the round means is the plugin's: its `resolve` turns every agent's
action into the round's declared metrics (and the agents it singles out); the runtime adds what
is the same for every plugin: the status counts, the histogram and segment statistics merged
from the workers' partial aggregates, and the LLM meters. The workers' aggregates and the
decisions must agree on how many valid answers there are, or the round is not kept.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields

import numpy as np

from backend.rounds.fanout import RoundResult
from backend.rounds.meters import Prices, round_meters
from backend.simulations.metrics_declared import MetricValue, declarations, metric_values
from backend.simulations.mixture import AgentParts, by_policy
from populace.plugin import (
    INVALID,
    LATE,
    LOST,
    MAX_GROUPS,
    STATUS_NAMES,
    VALID,
    Params,
    RoundActions,
    Simulation,
    agent_numbers,
)
from worker_server.rounds.decision_batch import decision_arrays
from worker_server.rpc import worker_pb2 as pb

# The rounds table's own columns for the guessing game's metrics, written from the metrics of
# the same names (null for a plugin without them) until those columns go.
# (winner_count is never null: 0 without winners.)
GAME_COLUMNS = ("mean", "median", "std", "min", "max", "target", "winner_value")


class PluginFailed(RuntimeError):
    """The plugin's code raised, or gave what its declaration rules out: the run pauses with
    this message (and the traceback in the manager's log), resumable after a fix."""


class InconsistentRound(RuntimeError):
    """Workers sent decisions that cannot be right (an agent twice): the round is not kept."""


@dataclass
class DecisionTable:
    """A round's decisions in agent id order; values are NaN unless the status is valid."""

    agent_ids: np.ndarray  # int64
    values: np.ndarray  # float64
    status: np.ndarray  # uint8: VALID, INVALID, LATE, LOST
    responses: list[str | None] | None  # raw answers, when the simulation stores them

    def __len__(self) -> int:
        return len(self.agent_ids)

    @property
    def valid_values(self) -> np.ndarray:
        return self.values[self.status == VALID]

    def subset(self, rows: np.ndarray) -> DecisionTable:
        """The decisions of the rows marked (a boolean mask), in the same order."""
        responses = None
        if self.responses is not None:
            responses = [r for r, keep in zip(self.responses, rows.tolist(), strict=True) if keep]
        return DecisionTable(self.agent_ids[rows], self.values[rows], self.status[rows], responses)


class _Chunks:
    """Decisions as growing numpy chunks (ids, values, status, raw answers)."""

    def __init__(self) -> None:
        self.ids: list[np.ndarray] = []
        self.values: list[np.ndarray] = []
        self.status: list[np.ndarray] = []
        self.responses: list[str | None] = []
        self.n = 0

    def add(self, ids, values, status: int, responses: list[str | None] | None) -> None:
        n = len(ids)
        self.ids.append(np.asarray(ids, dtype=np.int64))
        self.values.append(
            np.asarray(values, dtype=np.float64) if values is not None else np.full(n, np.nan)
        )
        self.status.append(np.full(n, status, dtype=np.uint8))
        if responses is not None:
            self.responses.extend(responses)
        self.n += n

    def extend(self, other: _Chunks) -> None:
        self.ids += other.ids
        self.values += other.values
        self.status += other.status
        self.responses += other.responses
        self.n += other.n


class RoundDecisions:
    """The fan-out's decision callback: keeps a round's decisions as growing numpy chunks.

    A worker's decisions are held apart until its stream ends with an aggregate (`keep`); a
    worker that fails mid-stream has its decisions dropped (`drop`), and its agents are asked
    again: the round keeps exactly the decisions its statistics were merged from.
    """

    def __init__(self, keep_responses: bool = False) -> None:
        self.keep_responses = keep_responses
        self._pending: dict[str, _Chunks] = {}
        self._kept = _Chunks()
        self.answered = 0

    def __call__(self, address: str, batch: pb.DecisionBatch) -> None:
        chunks = self._pending.setdefault(address, _Chunks())
        arrays = decision_arrays(batch)  # checked by the fan-out as the batch arrived
        parts = (
            (arrays.ids, arrays.values, VALID, batch.responses),
            (arrays.invalid_ids, None, INVALID, batch.invalid_responses),
            (arrays.late_ids, None, LATE, None),
        )
        for ids, values, status, responses in parts:
            n = len(ids)
            if not n:
                continue
            kept = None
            if self.keep_responses:
                # Aligned with the ids when the worker sent them; an empty string is "no answer".
                given = list(responses) if responses is not None and len(responses) == n else []
                kept = [(r or None) for r in given or [None] * n]
            chunks.add(ids, values, status, kept)
            self.answered += n

    def keep(self, address: str) -> None:
        """The worker's stream ended with its aggregate: its decisions count."""
        chunks = self._pending.pop(address, None)
        if chunks is not None:
            self._kept.extend(chunks)

    def salvage(self, address: str) -> tuple[np.ndarray, int, int] | None:
        """The worker's stream broke, but each decision it sent is final (keyed by seed, round
        and agent, it is what the agent would answer again): keep them, so only the agents it
        did not answer are asked again. Returns (valid values, n_invalid, n_late) kept, for
        the aggregate the worker did not send; None when it sent nothing."""
        chunks = self._pending.pop(address, None)
        if chunks is None or not chunks.n:
            return None
        self._kept.extend(chunks)
        status = np.concatenate(chunks.status)
        values = np.concatenate(chunks.values)[status == VALID]
        return values, int((status == INVALID).sum()), int((status == LATE).sum())

    def drop(self, address: str) -> None:
        """The worker failed mid-stream: forget what it sent."""
        chunks = self._pending.pop(address, None)
        if chunks is not None:
            self.answered -= chunks.n

    def add_lost(self, ids: np.ndarray) -> None:
        """Agents no live worker hosted: counted, with no value (allow_partial only)."""
        if len(ids):
            self._kept.add(ids, None, LOST, [None] * len(ids) if self.keep_responses else None)
            self.answered += len(ids)

    def missing(self, expected: np.ndarray) -> np.ndarray:
        """The agents of `expected` (sorted) without a kept decision, sorted."""
        if not self._kept.ids:
            return expected
        have = np.concatenate(self._kept.ids)
        return expected[~np.isin(expected, have, assume_unique=False)]

    def table(self) -> DecisionTable:
        kept = self._kept
        if not kept.ids:
            empty = np.empty(0, dtype=np.int64)
            return DecisionTable(
                empty, np.empty(0), np.empty(0, np.uint8), [] if self.keep_responses else None
            )
        ids = np.concatenate(kept.ids)
        order = np.argsort(ids, kind="stable")
        ids = ids[order]
        if len(ids) > 1 and not np.all(ids[1:] != ids[:-1]):
            twice = int(ids[1:][ids[1:] == ids[:-1]][0])
            raise InconsistentRound(f"agent {twice} answered twice in one round")
        responses = None
        if self.keep_responses:
            responses = np.asarray(kept.responses, dtype=object)[order].tolist()
        return DecisionTable(
            ids, np.concatenate(kept.values)[order], np.concatenate(kept.status)[order], responses
        )


@dataclass(frozen=True)
class RoundOutcome:
    round: int
    n_valid: int
    n_invalid: int
    n_late: int
    n_lost: int
    mean: float | None
    median: float | None
    std: float | None
    min: float | None
    max: float | None
    target: float | None
    winner_value: float | None
    winner_count: int
    winner_agents: list[int]
    histogram: list[int]
    segments: dict[str, dict[str, dict[str, float | int | None]]]
    prompt_tokens: int
    # Of prompt_tokens, those the LLM servers took from their prefix cache (as they reported it).
    cached_prompt_tokens: int
    completion_tokens: int
    llm_errors: int
    llm_requests: int
    # A network simulation: bytes of values the workers sent each other in the round.
    network_bytes: int
    duration_s: float
    # The plugin's declared metrics, {name: value}.
    metrics: dict[str, MetricValue] = field(default_factory=dict)
    # The LLM meters per endpoint (backend.rounds.meters); [] without an LLM.
    endpoints: list[dict] = field(default_factory=list)
    # A mixed policy's round by part: {label: {agents, n_valid, n_invalid, n_late, n_lost,
    # mean}} (backend.simulations.mixture); {} for one policy.
    metrics_by_policy: dict[str, dict] = field(default_factory=dict)
    # What each group hears before the next round (Resolution.groups): for the workers only.
    groups: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    # The plugin's group metrics (Resolution.group_metrics), kept in their own table.
    group_metrics: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def stats(self) -> dict:
        """The round as the store, the API and the events show it."""
        arrays = ("groups", "group_metrics")
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in arrays}


def _segments(result: RoundResult) -> dict:
    out: dict[str, dict[str, dict]] = {}
    for attribute, categories in result.stats.segments.items():
        out[attribute] = {}
        for category, seg in sorted(categories.items()):
            std = None
            if seg.count:
                mean = seg.sum / seg.count
                std = math.sqrt(max(0.0, seg.sum_sq / seg.count - mean * mean))
            out[attribute][category] = {"count": seg.count, "mean": seg.mean, "std": std}
    return out


@dataclass(frozen=True)
class Resolved:
    """A plugin's resolution of a round, checked against its declaration."""

    metrics: dict[str, MetricValue]
    winners: list[int]
    groups: dict[str, np.ndarray]
    group_metrics: dict[str, np.ndarray] = field(default_factory=dict)


def resolve(plugin: str, simulation: Simulation, params: Params, actions: RoundActions) -> Resolved:
    """The plugin's resolution of the round. PluginFailed when its code raises or breaks the
    declaration."""
    try:
        resolution = simulation.resolve(params, actions)
        metrics = metric_values(declarations(type(simulation)), resolution.metrics)
        winners = [int(agent) for agent in resolution.agents.get("winners", ())]
        groups = {}
        if resolution.groups and simulation.group_size(params) is None:
            raise ValueError("groups given, but it declares no group_size")
        for name, values in resolution.groups.items():
            values = np.asarray(values, dtype=np.float64)
            if not isinstance(name, str) or values.ndim != 1 or len(values) > MAX_GROUPS:
                raise ValueError(f"groups[{name!r}]: one number per group, up to {MAX_GROUPS}")
            groups[name] = values
        group_metrics = _group_metrics(simulation, resolution.group_metrics)
    except Exception as exc:
        raise PluginFailed(
            f"plugin {plugin!r} failed to resolve round {actions.round}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    return Resolved(metrics, winners, groups, group_metrics)


def _group_metrics(simulation: Simulation, given) -> dict[str, np.ndarray]:
    """The resolution's group metrics, checked against the declaration: declared names only,
    one float64 array each, all of one length (the number of groups)."""
    declared = {m.name for m in type(simulation).group_metrics}
    out: dict[str, np.ndarray] = {}
    for name, values in (given or {}).items():
        if name not in declared:
            raise ValueError(f"group_metrics[{name!r}]: not declared in group_metrics")
        values = np.asarray(values, dtype=np.float64)
        if values.ndim != 1 or len(values) > MAX_GROUPS:
            raise ValueError(f"group_metrics[{name!r}]: one number per group, up to {MAX_GROUPS}")
        out[name] = values
    if len({len(v) for v in out.values()}) > 1:
        raise ValueError("group_metrics: every array holds one value per group, the same count")
    return out


def outcome(
    round_number: int,
    result: RoundResult,
    table: DecisionTable,
    plugin: str,
    simulation: Simulation,
    params: Params,
    prices: Prices | None = None,
    parts: AgentParts | None = None,
    previous_metrics: Mapping[str, MetricValue] | None = None,
    groups: np.ndarray | None = None,
    previous_group_metrics: Mapping[str, np.ndarray] | None = None,
) -> RoundOutcome:
    counts = np.bincount(table.status, minlength=len(STATUS_NAMES))
    n_valid = int(counts[VALID])
    if result.stats.n_valid != n_valid:
        raise InconsistentRound(
            f"the workers' aggregates count {result.stats.n_valid} valid answers and their "
            f"decisions {n_valid}"
        )
    actions = RoundActions(
        round_number,
        table.agent_ids,
        table.values,
        table.status,
        previous_metrics=dict(previous_metrics or {}),
        groups=None if groups is None else groups[agent_numbers(table.agent_ids)],
        previous_group_metrics=dict(previous_group_metrics or {}),
    )
    resolved = resolve(plugin, simulation, params, actions)
    metrics = resolved.metrics
    partials = result.partials.values()
    return RoundOutcome(
        round=round_number,
        n_valid=n_valid,
        n_invalid=int(counts[INVALID]),
        n_late=int(counts[LATE]),
        n_lost=int(counts[LOST]),
        **{name: metrics.get(name) for name in GAME_COLUMNS},
        winner_count=int(metrics.get("winner_count") or 0),
        winner_agents=resolved.winners,
        histogram=result.stats.histogram,
        segments=_segments(result),
        prompt_tokens=sum(p.prompt_tokens for p in partials),
        cached_prompt_tokens=sum(p.cached_tokens for p in partials),
        completion_tokens=sum(p.completion_tokens for p in partials),
        llm_errors=sum(p.llm_errors for p in partials),
        llm_requests=sum(e.requests for p in partials for e in p.endpoints),
        network_bytes=sum(p.network_bytes for p in partials),
        duration_s=round(result.elapsed_s, 6),
        metrics=metrics,
        metrics_by_policy=(
            by_policy(parts, table.agent_ids, table.values, table.status) if parts else {}
        ),
        groups=resolved.groups,
        group_metrics=resolved.group_metrics,
        endpoints=round_meters(
            (e for p in partials for e in p.endpoints), result.elapsed_s, prices or {}
        ),
    )
