"""A plugin's environment on the manager: resolve gives the round's declared metrics, feedback
and stop come from metrics alone, and a plugin that raises or breaks its declaration is caught
as PluginFailed (the run pauses with its message) instead of taking the manager down."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import ValidationError

from backend.rounds.fanout import RoundResult
from backend.rounds.merge import merge
from backend.simulations.config import SimulationConfig
from backend.simulations.environment import Told, as_history, feedback_of
from backend.simulations.outcome import PluginFailed, RoundDecisions, outcome
from populace.plugin import (
    INVALID,
    LATE,
    VALID,
    Metric,
    NumberAction,
    PolicySupport,
    Resolution,
    RoundActions,
    Simulation,
)
from tests.support import guess_game
from worker_server.rpc import worker_pb2 as pb

RULE = pb.GameRule(ratio=0.5, offset=5, min=0, max=100)


class Sums(Simulation):
    """A test plugin whose resolve is whatever the test sets."""

    title = "Sums"
    metrics = (Metric("total", "Total"), Metric("agents", "Agents", type="integer"))
    policies = (PolicySupport("synthetic", "Synthetic"),)
    resolver = staticmethod(lambda actions: Resolution({"total": 1.0, "agents": 1}))

    def action(self, params):
        return NumberAction(0, 100)

    def resolve(self, params, actions):
        return type(self).resolver(actions)


def _round(values: list[float]) -> tuple[RoundResult, object]:
    collected = RoundDecisions()
    collected("w", pb.DecisionBatch(agent_ids=list(range(len(values))), values=values))
    collected.keep("w")
    part = pb.PartialAggregate(
        count=len(values),
        sum=sum(values),
        min=min(values),
        max=max(values),
        histogram=np.histogram(values, 101, range=(0, 100))[0].tolist(),
    )
    return RoundResult(merge([part], RULE, 101), {"w": part}, len(values), 0.1), collected.table()


def test_the_plugins_resolution_is_the_rounds_metrics_in_their_declared_types():
    result, table = _round([10.0, 20.0, 40.0])

    def resolver(actions: RoundActions) -> Resolution:
        assert actions.agent_ids.tolist() == [0, 1, 2] and actions.round == 3
        assert actions.valid.all() and actions.count(INVALID) == 0
        return Resolution({"total": float(actions.values.sum()), "agents": np.int64(3)})

    Sums.resolver = staticmethod(resolver)
    played = outcome(3, result, table, "sums", Sums(), None)
    assert played.metrics == {"total": 70.0, "agents": 3}
    assert type(played.metrics["agents"]) is int
    # The guessing game's own columns stay empty for a plugin without those metrics.
    assert played.mean is None and played.winner_agents == []
    assert played.stats()["metrics"] == played.metrics


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        ({"total": 1.0}, "metric 'agents' has no value"),
        ({"total": math.nan, "agents": 1}, "'total': a finite number or None"),
        ({"total": "1", "agents": 1}, "'total': a number or None"),
        ({"total": 1.0, "agents": 1, "extra": 2}, "metrics 'extra' are not declared"),
    ],
)
def test_a_resolution_that_breaks_the_declaration_is_the_plugins_failure(given, reason):
    result, table = _round([1.0])
    Sums.resolver = staticmethod(lambda actions: Resolution(given))
    with pytest.raises(PluginFailed, match=f"plugin 'sums' failed to resolve round 2: .*{reason}"):
        outcome(2, result, table, "sums", Sums(), None)


def test_a_resolve_that_raises_is_the_plugins_failure_with_its_error():
    result, table = _round([1.0])

    def resolver(actions):
        raise ZeroDivisionError("division by zero")

    Sums.resolver = staticmethod(resolver)
    with pytest.raises(PluginFailed, match="ZeroDivisionError: division by zero") as caught:
        outcome(1, result, table, "sums", Sums(), None)
    assert isinstance(caught.value.__cause__, ZeroDivisionError)  # the traceback is kept


def test_the_guessing_games_feedback_comes_from_its_metrics_alone():
    name, simulation, params = guess_game(0.5, 5)
    result, table = _round([10.0, 20.0, 40.0])
    played = outcome(1, result, table, name, simulation, params)
    told = feedback_of(name, simulation, params, 1, played.metrics)
    assert (told.round, told.values) == (1, {"winner": played.winner_value})
    with_mean = type(simulation).params.model_validate(
        {"rule": {"ratio": 0.5, "offset": 5}, "feedback": {"mean": True}}
    )
    told = feedback_of(name, simulation, with_mean, 1, played.metrics)
    assert told.values["mean"] == played.mean == 70 / 3
    # As the guessing game's workers take it.
    (message,) = as_history([told], name)
    assert (message.round, message.winner, message.mean) == (1, played.winner_value, 70 / 3)
    # A round without a valid answer tells nothing new.
    nothing = dict(played.metrics, winner_value=None, mean=None)
    assert feedback_of(name, simulation, params, 2, nothing) is None


@pytest.mark.parametrize(
    ("told", "reason"),
    [
        ({"winner": "high"}, "could not convert string to float"),
        ({"winner": math.inf}, "'winner': inf is not finite"),
        ({"winner": True}, "is not a named number"),
    ],
)
def test_feedback_that_is_not_named_numbers_is_the_plugins_failure(told, reason):
    class Chatty(Sums):
        def feedback(self, params, metrics):
            return told

    with pytest.raises(PluginFailed, match=f"failed to give the feedback of round 4: .*{reason}"):
        feedback_of("chatty", Chatty(), None, 4, {"total": 1.0, "agents": 1})


def test_feedback_the_guessing_games_workers_cannot_take_is_the_plugins_failure():
    told = Told(3, {"gossip": 1.0})
    with pytest.raises(PluginFailed, match="the guessing game's workers cannot take"):
        as_history([told], "guess")


def test_statuses_reach_the_plugin_per_agent():
    collected = RoundDecisions()
    collected("w", pb.DecisionBatch(agent_ids=[3, 1], values=[5.0, 7.0], invalid_ids=[2]))
    collected("w", pb.DecisionBatch(late_ids=[4]))
    collected.keep("w")
    part = pb.PartialAggregate(count=2, sum=12, min=5, max=7, n_invalid=1, n_late=1)
    part.histogram.extend([0] * 101)
    result = RoundResult(merge([part], RULE, 101), {"w": part}, 4, 0.1)
    seen = {}

    def resolver(actions):
        seen["status"] = actions.status.tolist()
        seen["values"] = actions.values.tolist()
        return Resolution({"total": None, "agents": int(actions.valid.sum())})

    Sums.resolver = staticmethod(resolver)
    played = outcome(1, result, table := collected.table(), "sums", Sums(), None)
    assert table.agent_ids.tolist() == [1, 2, 3, 4]
    assert seen["status"] == [VALID, INVALID, VALID, LATE]
    assert seen["values"][0] == 7.0 and math.isnan(seen["values"][1])
    assert played.metrics == {"total": None, "agents": 2}


def _config(**stop) -> dict:
    return {"population_id": 1, "rounds": 5, "stop_when_converged": {"tolerance": 1, **stop}}


def test_convergence_watches_the_plugins_metric_or_the_one_named():
    assert SimulationConfig.model_validate(_config()).convergence_metric == "mean"
    named = SimulationConfig.model_validate(_config(metric="median"))
    assert named.convergence_metric == "median"
    assert (
        SimulationConfig.model_validate(
            _config() | {"stop_when_converged": None}
        ).convergence_metric
        is None
    )


def test_convergence_on_a_metric_the_plugin_does_not_declare_is_refused_at_the_field():
    with pytest.raises(ValidationError) as caught:
        SimulationConfig.model_validate(_config(metric="happiness"))
    (error,) = caught.value.errors()
    assert error["loc"] == ("stop_when_converged", "metric")
    assert "declares no metric 'happiness'" in error["msg"] and "winner_value" in error["msg"]
