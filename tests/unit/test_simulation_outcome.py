"""A round's outcome from collected decisions: exact statistics, winners, independence from order."""

from __future__ import annotations

import math

import numpy as np
import pytest

from backend.rounds.fanout import RoundResult
from backend.rounds.merge import merge
from backend.simulations.outcome import (
    INVALID,
    LATE,
    LOST,
    VALID,
    InconsistentRound,
    RoundDecisions,
    outcome,
)
from populace.builtins.guess import closest
from populace.plugin import SUM_STEP, exact_sum
from tests.support import guess_game
from worker_server.rpc import worker_pb2 as pb

RULE = pb.GameRule(ratio=0.5, offset=5, min=0, max=100)


def _batches(ids, values, invalid=(), late=(), responses=None, invalid_responses=None):
    return pb.DecisionBatch(
        agent_ids=list(ids),
        values=list(values),
        invalid_ids=list(invalid),
        late_ids=list(late),
        responses=responses or [],
        invalid_responses=invalid_responses or [],
    )


def _result(values: np.ndarray) -> RoundResult:
    part = pb.PartialAggregate(
        count=len(values),
        sum=float(values.sum()),
        sum_sq=float((values**2).sum()),
        min=float(values.min()),
        max=float(values.max()),
        histogram=np.histogram(values, 101, range=(0, 100))[0].tolist(),
        prompt_tokens=30,
        completion_tokens=4,
        llm_errors=1,
    )
    return RoundResult(merge([part], RULE, 101), {"w1": part}, len(values), 0.25)


def test_collected_decisions_are_sorted_by_agent_with_their_status_and_answers():
    collected = RoundDecisions(keep_responses=True)
    collected(
        "w2",
        _batches(
            [30, 10], [3.0, 1.0], invalid=[20], responses=["3", "1"], invalid_responses=["banana"]
        ),
    )
    collected("w1", _batches([5], [7.5], late=[40], responses=["7.5"]))
    assert collected.answered == 5
    collected.keep("w1")
    collected.keep("w2")
    table = collected.table()
    assert table.agent_ids.tolist() == [5, 10, 20, 30, 40]
    assert table.status.tolist() == [VALID, VALID, INVALID, VALID, LATE]
    assert table.values[[0, 1, 3]].tolist() == [7.5, 1.0, 3.0]
    assert np.isnan(table.values[[2, 4]]).all()
    assert table.responses == ["7.5", "1", "banana", "3", None]


def test_a_failed_workers_decisions_are_dropped_and_its_agents_are_missing():
    collected = RoundDecisions()
    collected("alive", _batches([1, 3], [1.0, 3.0]))
    collected("dead", _batches([2], [2.0]))  # it sent some decisions, then its stream broke
    collected.keep("alive")
    collected.drop("dead")
    assert collected.answered == 2
    expected = np.arange(1, 6, dtype=np.int64)
    assert collected.missing(expected).tolist() == [2, 4, 5]
    # The lost agents' re-run lands; the rest are counted lost, never silently absent.
    collected("again", _batches([2, 4], [2.5, 4.0]))
    collected.keep("again")
    collected.add_lost(collected.missing(expected))
    table = collected.table()
    assert table.agent_ids.tolist() == [1, 2, 3, 4, 5]
    assert table.status.tolist() == [VALID, VALID, VALID, VALID, LOST]
    assert table.values[1] == 2.5 and np.isnan(table.values[4])
    result = outcome(1, _result(np.array([1.0, 2.5, 3.0, 4.0])), table, *guess_game(0.5, 0.0))
    assert (result.n_valid, result.n_lost) == (4, 1)


def test_responses_are_not_kept_unless_asked():
    collected = RoundDecisions()
    collected("w", _batches([1], [2.0], responses=["2"]))
    collected.keep("w")
    assert collected.table().responses is None


def test_an_agent_answering_twice_is_refused():
    collected = RoundDecisions()
    collected("w1", _batches([1, 2], [1.0, 2.0]))
    collected("w2", _batches([2], [3.0]))
    collected.keep("w1")
    collected.keep("w2")
    with pytest.raises(InconsistentRound, match="agent 2 answered twice"):
        collected.table()


def test_outcome_statistics_target_and_winners():
    rng = np.random.default_rng(1)
    values = np.round(rng.uniform(0, 100, 1001), 1)
    ids = np.arange(1001, dtype=np.int64) * 3
    collected = RoundDecisions()
    collected("w", _batches(ids[:500], values[:500], invalid=[9999]))
    collected("w", _batches(ids[500:], values[500:], late=[99999]))
    collected.keep("w")
    result = outcome(4, _result(values), collected.table(), *guess_game(0.5, 5.0))
    assert (result.round, result.n_valid, result.n_invalid, result.n_late) == (4, 1001, 1, 1)
    assert result.mean == math.fsum(values) / 1001
    assert result.median == float(np.median(values))
    assert result.std == pytest.approx(values.std(), rel=1e-12)
    assert (result.min, result.max) == (values.min(), values.max())
    assert result.target == 0.5 * result.mean + 5
    best = np.abs(values - result.target).min()
    assert abs(result.winner_value - result.target) == best
    assert result.winner_count == int((values == result.winner_value).sum())
    assert result.winner_agents == ids[values == result.winner_value][:100].tolist()
    assert (result.prompt_tokens, result.completion_tokens, result.llm_errors) == (30, 4, 1)
    assert sum(result.histogram) == 1001


def test_the_outcome_does_not_depend_on_the_order_decisions_arrive_in():
    rng = np.random.default_rng(2)
    values = rng.normal(30, 10, 20_000).clip(0, 100)
    ids = np.arange(20_000, dtype=np.int64)
    outcomes = []
    for seed in (1, 2):
        order = np.random.default_rng(seed).permutation(20_000)
        collected = RoundDecisions()
        for chunk in np.array_split(order, 7):
            collected("w", _batches(ids[chunk], values[chunk]))
        collected.keep("w")
        outcomes.append(outcome(1, _result(values), collected.table(), *guess_game(2 / 3, 0.0)))
    a, b = outcomes
    assert a.n_valid == 20_000 and a.mean == exact_sum(values) / 20_000
    assert (a.mean, a.median, a.std, a.target, a.winner_value) == (
        b.mean,
        b.median,
        b.std,
        b.target,
        b.winner_value,
    )


def test_a_tie_between_two_values_goes_to_the_lower_one():
    ids = np.array([1, 2, 3, 4], dtype=np.int64)
    values = np.array([12.0, 8.0, 12.0, 30.0])
    assert closest(ids, values, 10.0) == (8.0, 1, [2])
    assert closest(ids, values, 11.0) == (12.0, 2, [1, 3])
    assert closest(ids, values, 11.0, cap=1) == (12.0, 2, [1])


def test_a_round_without_valid_answers_has_no_target_or_winner():
    collected = RoundDecisions()
    collected("w", _batches([], [], invalid=[1, 2], late=[3]))
    collected.keep("w")
    empty = pb.PartialAggregate(n_invalid=2, n_late=1, histogram=[0] * 101)
    result = outcome(
        2,
        RoundResult(merge([empty], RULE, 101), {"w": empty}, 3, 0.1),
        collected.table(),
        *guess_game(0.5, 5),
    )
    assert (result.n_valid, result.n_invalid, result.n_late) == (0, 2, 1)
    assert result.mean is None and result.target is None and result.winner_value is None
    assert result.winner_count == 0 and result.winner_agents == []


def test_the_sum_is_exactly_rounded_across_steps():
    """Cancellation that a float64 running or pairwise sum gets wrong, spread over several of
    exact_sum's steps: the answer is still math.fsum's."""
    rng = np.random.default_rng(11)
    values = np.concatenate([[1e16], rng.uniform(0, 1, 3 * SUM_STEP), [-1e16]])
    exact = math.fsum(values.tolist())
    assert exact_sum(values) == exact
    assert float(np.sum(values)) != exact  # the case is a real one
    assert exact_sum(np.empty(0)) == 0.0


def test_aggregates_and_decisions_that_disagree_on_the_valid_count_are_not_kept():
    """The histogram comes from the workers' aggregates, the metrics from the decisions: a
    worker whose aggregate does not count what it sent is caught, not averaged in."""
    collected = RoundDecisions()
    collected("w", _batches([1, 2, 3, 4], [1.0, 2.0, 3.0, 4.0]))
    collected.keep("w")
    table = collected.table()
    played = outcome(1, _result(np.array([1.0, 2.0, 3.0, 4.0])), table, *guess_game(0.5, 0.0))
    assert (played.min, played.max, played.mean, played.median) == (1.0, 4.0, 2.5, 2.5)
    with pytest.raises(InconsistentRound, match="count 3 valid answers and their decisions 4"):
        outcome(1, _result(np.array([1.0, 2.0, 3.0])), table, *guess_game(0.5, 0.0))


def test_a_rounds_statistics_are_spelled_once():
    """What the runner keeps, the API answers and `round.completed` carries are one model's
    fields (backend.simulations.schemas.RoundStatistics): a field added to the round is added
    to all three, or this fails."""
    from dataclasses import fields

    from backend.events.catalog import RoundCompleted
    from backend.simulations.outcome import RoundOutcome
    from backend.simulations.schemas import RoundOut, RoundStatistics

    kept = {f.name for f in fields(RoundOutcome)} - {"groups", "group_metrics"}
    assert kept == set(RoundStatistics.model_fields)
    assert set(RoundStatistics.model_fields) <= set(RoundOut.model_fields)
    assert set(RoundStatistics.model_fields) <= set(RoundCompleted.model_fields)
