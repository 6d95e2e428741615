"""One round's outcome from the decisions that streamed back: the numbers the game is about.

The decisions are collected as numpy columns while the round runs (never one object per agent),
then sorted by agent id. Statistics of the values (mean, median, std, min, max) are computed
here over that sorted column, with an exactly rounded sum for the mean, so they do not depend on
how the population is spread over workers or in which order cohorts finished: the winning
number, and with it the next round, is the same for the same seed. Histogram and per-segment
figures come from the workers' merged partial aggregates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from backend.rounds.fanout import RoundResult
from worker_server.rpc import worker_pb2 as pb

VALID, INVALID, LATE = 0, 1, 2
STATUS_NAMES = ("valid", "invalid", "late")
# Winners listed by id in a round's row; the count is always exact.
WINNER_AGENTS_CAP = 100


class InconsistentRound(RuntimeError):
    """Workers sent decisions that cannot be right (an agent twice): the round is not kept."""


@dataclass
class DecisionTable:
    """A round's decisions in agent id order; values are NaN unless the status is valid."""

    agent_ids: np.ndarray  # int64
    values: np.ndarray  # float64
    status: np.ndarray  # uint8: VALID, INVALID, LATE
    responses: list[str | None] | None  # raw answers, when the simulation stores them

    def __len__(self) -> int:
        return len(self.agent_ids)

    @property
    def valid_values(self) -> np.ndarray:
        return self.values[self.status == VALID]


class RoundDecisions:
    """The fan-out's decision callback: keeps a round's decisions as growing numpy chunks."""

    def __init__(self, keep_responses: bool = False) -> None:
        self.keep_responses = keep_responses
        self._ids: list[np.ndarray] = []
        self._values: list[np.ndarray] = []
        self._status: list[np.ndarray] = []
        self._responses: list[str | None] = []
        self.answered = 0

    def __call__(self, _address: str, batch: pb.DecisionBatch) -> None:
        parts = (
            (batch.agent_ids, batch.values, VALID, batch.responses),
            (batch.invalid_ids, None, INVALID, batch.invalid_responses),
            (batch.late_ids, None, LATE, None),
        )
        for ids, values, status, responses in parts:
            n = len(ids)
            if not n:
                continue
            self._ids.append(np.asarray(ids, dtype=np.int64))
            self._values.append(
                np.asarray(values, dtype=np.float64) if values is not None else np.full(n, np.nan)
            )
            self._status.append(np.full(n, status, dtype=np.uint8))
            if self.keep_responses:
                # Aligned with the ids when the worker sent them; an empty string is "no answer".
                given = list(responses) if responses is not None and len(responses) == n else []
                self._responses.extend((r or None) for r in given or [None] * n)
            self.answered += n

    def table(self) -> DecisionTable:
        if not self._ids:
            empty = np.empty(0, dtype=np.int64)
            return DecisionTable(
                empty, np.empty(0), np.empty(0, np.uint8), [] if self.keep_responses else None
            )
        ids = np.concatenate(self._ids)
        order = np.argsort(ids, kind="stable")
        ids = ids[order]
        if len(ids) > 1 and not np.all(ids[1:] != ids[:-1]):
            twice = int(ids[1:][ids[1:] == ids[:-1]][0])
            raise InconsistentRound(f"agent {twice} answered twice in one round")
        responses = None
        if self.keep_responses:
            kept = np.asarray(self._responses, dtype=object)
            responses = kept[order].tolist()
        return DecisionTable(
            ids, np.concatenate(self._values)[order], np.concatenate(self._status)[order], responses
        )


@dataclass(frozen=True)
class RoundOutcome:
    round: int
    n_valid: int
    n_invalid: int
    n_late: int
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
    completion_tokens: int
    llm_errors: int
    duration_s: float

    def stats(self) -> dict:
        """The round as the API and the events show it: every field."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


# Values handed to math.fsum per step of exact_sum.
SUM_STEP = 1 << 14


def exact_sum(values: np.ndarray) -> float:
    """The correctly rounded sum (math.fsum), fed a slice at a time: fsum and tolist are C
    calls that hold the GIL throughout, and this runs in a thread beside the event loop, which
    must get the GIL back within a millisecond or so, not after 10^6 values."""

    def floats():
        for start in range(0, len(values), SUM_STEP):
            # The loop's jump back is where the interpreter may hand the GIL over.
            yield from values[start : start + SUM_STEP].tolist()

    return math.fsum(floats())


def closest(
    ids: np.ndarray, values: np.ndarray, target: float, cap: int = WINNER_AGENTS_CAP
) -> tuple[float, int, list[int]]:
    """(winning value, how many chose it, the first `cap` of them by id).

    Winners are the agents closest to the target; when two different values are equally close
    (one above, one below) the lower one wins, so the outcome never depends on order.
    """
    distance = np.abs(values - target)
    nearest = distance == distance.min()
    value = float(values[nearest].min())
    chose = ids[values == value]
    return value, len(chose), chose[:cap].tolist()


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


def outcome(
    round_number: int,
    result: RoundResult,
    table: DecisionTable,
    ratio: float,
    offset: float,
) -> RoundOutcome:
    values = table.valid_values
    ids = table.agent_ids[table.status == VALID]
    n_valid = len(values)
    counts = np.bincount(table.status, minlength=3)
    mean = median = std = low = high = target = winner = None
    winner_count, winner_agents = 0, []
    if n_valid:
        mean = exact_sum(values) / n_valid
        median = float(np.median(values))
        std = float(np.sqrt(np.mean((values - mean) ** 2)))
        low, high = float(values.min()), float(values.max())
        target = ratio * mean + offset
        winner, winner_count, winner_agents = closest(ids, values, target)
    partials = result.partials.values()
    return RoundOutcome(
        round=round_number,
        n_valid=n_valid,
        n_invalid=int(counts[INVALID]),
        n_late=int(counts[LATE]),
        mean=mean,
        median=median,
        std=std,
        min=low,
        max=high,
        target=target,
        winner_value=winner,
        winner_count=winner_count,
        winner_agents=winner_agents,
        histogram=result.stats.histogram,
        segments=_segments(result),
        prompt_tokens=sum(p.prompt_tokens for p in partials),
        completion_tokens=sum(p.completion_tokens for p in partials),
        llm_errors=sum(p.llm_errors for p in partials),
        duration_s=round(result.elapsed_s, 6),
    )
