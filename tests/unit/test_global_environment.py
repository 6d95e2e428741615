"""The global environment through its workers port, with the workers' own round code in this
process (no sockets): the plugin's feedback reaches the next round, its stop rule and the
generic convergence rule end a run, a plugin that raises pauses the run after the last kept
round, and the outcome does not depend on how agents are spread over workers."""

from __future__ import annotations

import contextlib
import json

import numpy as np
import pytest

from backend.simulations.config import SimulationConfig
from backend.simulations.environment import GlobalEnvironment, SimulationPaused
from backend.simulations.spec import game_spec
from populace.builtins.guess import GuessingGame
from tests.support_rounds import make_store
from worker_server.rounds import AgentSlots, PartialAggregate, SubEnvironment
from worker_server.rounds.wire import aggregate_message, decisions_message, round_spec
from worker_server.rpc import worker_pb2 as pb

POPULATION = 1
SIZE = 1_000


class InProcessWorker:
    """The workers port to a worker's round code in this process: the servicer's RunRound
    without gRPC around it."""

    def __init__(self, address: str, agents: range) -> None:
        self.address = address
        ids = (np.int64(POPULATION) << 32) | np.asarray(agents, dtype=np.int64)
        self.subenv = SubEnvironment(make_store(ids, str(POPULATION)), AgentSlots(10_000))
        self.requests: list[pb.RunRoundRequest] = []

    async def run_round(self, request: pb.RunRoundRequest, timeout: float | None = None):
        self.requests.append(request)
        outputs = self.subenv.run(round_spec(request))
        async with contextlib.aclosing(outputs):
            async for output in outputs:
                if isinstance(output, PartialAggregate):
                    yield aggregate_message(output)
                else:
                    yield decisions_message(output)

    async def cancel_round(self, round_id: str, timeout: float = 10.0) -> bool:
        return self.subenv.cancel(round_id)

    async def probe_llm(self, endpoints, timeout_s=5.0, check_only=False):
        return pb.ProbeLlmReply()

    async def close(self) -> None:
        pass


class Kept:
    """A listener that keeps what each round commits."""

    def __init__(self) -> None:
        self.rounds = []

    async def round_started(self, env, round_number):
        pass

    def decisions_arrived(self, env, round_number, answered):
        pass

    async def round_completed(self, env, result, decisions):
        self.rounds.append((result, decisions))


def _environment(
    workers: int = 2, simulation=None, spans: bool = False, **config
) -> tuple[GlobalEnvironment, Kept, dict[str, InProcessWorker]]:
    config = {
        "population_id": POPULATION,
        "rounds": 4,
        "plugin": {"name": "guess", "params": {"rule": {"preset": "1/2+5"}}},
        "policy": {"kind": "level_k", "default_depth": 0, "noise_std": 3.0},
        "seed": 7,
    } | config
    spec = game_spec(SimulationConfig.model_validate(config), simulation_id=1, seed=7)
    bounds = np.linspace(0, SIZE, workers + 1, dtype=int)
    ports = {
        f"w{i}": InProcessWorker(f"w{i}", range(bounds[i], bounds[i + 1])) for i in range(workers)
    }

    async def hosts():
        return list(ports)

    async def agent_spans():
        return {f"w{i}": (int(bounds[i]), int(bounds[i + 1]) - 1) for i in range(workers)}

    kept = Kept()
    env = GlobalEnvironment(
        spec,
        hosts,
        [kept],
        population_size=SIZE,
        connect=ports.__getitem__,
        simulation=simulation,
        spans=agent_spans if spans else None,
    )
    return env, kept, ports


async def test_each_rounds_feedback_is_what_the_next_round_hears():
    env, kept, ports = _environment()
    await env.run()
    assert [r.round for r, _ in kept.rounds] == [1, 2, 3, 4]
    winners = [r.winner_value for r, _ in kept.rounds]
    assert [t.values["winner"] for t in env.told] == winners
    # Every worker was told the winning number of the round before.
    for worker in ports.values():
        assert [r.feedback for r in worker.requests[1:]] == winners[:3]
        assert not worker.requests[0].HasField("feedback")
    # Depth-0 agents anchor on what they heard: round 2's guesses centre on round 1's winner.
    second = kept.rounds[1][1]
    assert abs(float(np.mean(second.values)) - winners[0]) < 1.0
    assert [r.metrics["winner_value"] for r, _ in kept.rounds] == winners


async def test_the_outcome_does_not_depend_on_how_agents_are_spread_over_workers():
    outcomes = []
    for workers in (1, 3):
        env, kept, _ = _environment(workers)
        await env.run()
        outcomes.append([r.metrics for r, _ in kept.rounds])
    assert outcomes[0] == outcomes[1]


class FailsInRound2(GuessingGame):
    def resolve(self, params, actions):
        if actions.round == 2:
            raise RuntimeError("boom")
        return super().resolve(params, actions)


async def test_a_plugin_that_raises_pauses_the_run_after_the_last_kept_round():
    env, kept, _ = _environment(simulation=FailsInRound2())
    with pytest.raises(
        SimulationPaused, match="plugin 'guess' failed to resolve round 2: RuntimeError: boom"
    ):
        await env.run()
    assert [r.round for r, _ in kept.rounds] == [1]
    assert env.played == 1 and len(env.metrics) == 1


class StopsAtTwoWinners(GuessingGame):
    def stop(self, params, history):
        return "two rounds are enough" if len(history) == 2 else None


async def test_the_plugins_stop_rule_ends_the_run_with_its_reason():
    env, kept, _ = _environment(simulation=StopsAtTwoWinners())
    await env.run()
    assert len(kept.rounds) == 2 and env.stop_reason == "two rounds are enough"


async def test_convergence_watches_the_metric_it_is_told_to():
    # Without noise every agent says the same number, approaching 10 by halves: each round all
    # of them win (winner_count is steady from round 1), while the mean moves by 20, 10, 5, ...
    stopped = {}
    for metric in ("winner_count", "mean"):
        env, kept, _ = _environment(
            rounds=30,
            policy={"kind": "level_k", "default_depth": 1, "noise_std": 0.0},
            stop_when_converged={"window": 2, "tolerance": 0.5, "metric": metric},
        )
        await env.run()
        assert env.stop_reason == "converged"
        stopped[metric] = [r.metrics[metric] for r, _ in kept.rounds]
    assert stopped["winner_count"] == [SIZE, SIZE]
    means = stopped["mean"]
    assert len(means) > 2 and abs(means[-1] - means[-2]) <= 0.5 < abs(means[-2] - means[-3])


def _public_goods(policy: dict, **config):
    return _environment(
        plugin={"name": "public_goods", "params": {"endowment": 20, "multiplier": 2}},
        policy=policy,
        rounds=3,
        **config,
    )


async def test_a_plugins_own_policy_plays_its_rounds_on_the_workers():
    env, kept, ports = _public_goods({"kind": "conditional_cooperator", "params": {"first": 0.3}})
    await env.run()
    first, second, third = (r for r, _ in kept.rounds)
    # Round 1: everyone gives 30 % of 20; the pot of 60 doubled is shared by the 10 members.
    assert first.metrics == {
        "mean_contribution": 6.0,
        "contribution_share": 0.3,
        "free_rider_share": 0.0,
        "mean_payoff": 20 - 6 + 2 * 60 / 10,
        "n_valid": SIZE,
        "n_invalid": 0,
    }
    # Then each agent gives what its group gave on average: its group's value reached it.
    assert second.metrics == third.metrics == first.metrics
    for worker in ports.values():
        request = worker.requests[1]
        assert request.policy.plugin.name == "conditional_cooperator"
        assert json.loads(request.plugin.feedback_json) == {"mean_contribution": 6.0}
        (groups,) = [g for g in request.plugin.groups if g.name == "mean_contribution"]
        assert list(groups.values) == [6.0] * (SIZE // 10)
        assert not request.history and not request.HasField("feedback")
    assert [t.values for t in env.told] == [{"mean_contribution": 6.0}] * 3
    # Its decisions are whole numbers of tokens, kept as the action's values.
    assert set(kept.rounds[0][1].values.tolist()) == {6.0}


async def test_free_riders_keep_their_endowment_and_are_counted():
    env, kept, _ = _public_goods({"kind": "free_rider"})
    await env.run()
    assert [r.metrics["free_rider_share"] for r, _ in kept.rounds] == [1.0, 1.0, 1.0]
    assert {r.metrics["mean_payoff"] for r, _ in kept.rounds} == {20.0}
    # The guessing game's own columns stay empty.
    assert kept.rounds[0][0].mean is None and kept.rounds[0][0].winner_agents == []


def _el_farol(policy: dict, workers: int = 2, **params):
    return _environment(
        workers,
        plugin={"name": "el_farol", "params": params},
        policy=policy,
        rounds=3,
    )


async def test_el_farol_goers_crowd_the_bar_then_stay_home():
    # Round 1 everyone goes (crowded: 0 each); predicting a crowd, everyone stays (5 each);
    # predicting an empty bar, everyone goes again.
    env, kept, ports = _el_farol({"kind": "predictor", "params": {"first": 1.0, "noise": 0.0}})
    await env.run()
    metrics = [r.metrics for r, _ in kept.rounds]
    assert [m["go_ratio"] for m in metrics] == [1.0, 0.0, 1.0]
    assert [m["crowded_share"] for m in metrics] == [1.0, 0.0, 1.0]
    assert [m["mean_payoff"] for m in metrics] == [0.0, 5.0, 0.0]
    # The choices are kept as the options' indexes: go 0, stay 1.
    assert [set(d.values.tolist()) for _, d in kept.rounds] == [{0.0}, {1.0}, {0.0}]
    (groups,) = [g for g in ports["w0"].requests[1].plugin.groups if g.name == "go_ratio"]
    assert list(groups.values) == [1.0] * (SIZE // 10)


async def test_el_farol_chances_do_not_depend_on_placement():
    runs = []
    for workers in (1, 3):
        env, kept, _ = _el_farol({"kind": "fixed_probability", "params": {"go": 0.6}}, workers)
        await env.run()
        runs.append([(r.metrics, d.values.tolist()) for r, d in kept.rounds])
    assert runs[0] == runs[1]
    go_ratio = runs[0][0][0]["go_ratio"]
    assert 0.5 < go_ratio < 0.7 and 0 < runs[0][0][0]["crowded_share"] < 1


async def test_each_worker_is_sent_only_the_groups_its_agents_are_in():
    # 1,000 agents over 3 workers (333, 333, 334): groups of 10 straddle the workers' edges.
    runs = {}
    for sliced in (False, True):
        env, kept, ports = _environment(
            3,
            spans=sliced,
            plugin={"name": "el_farol", "params": {}},
            policy={"kind": "predictor", "params": {"noise": 0.3}},
            rounds=3,
        )
        await env.run()
        runs[sliced] = [(r.metrics, d.values.tolist()) for r, d in kept.rounds]
        if sliced:
            second = {name: worker.requests[1].plugin for name, worker in ports.items()}
            assert [(p.group_offset, len(p.groups[0].values)) for p in second.values()] == [
                (0, 34),  # agents 0-332: groups 0-33
                (33, 34),  # agents 333-665: groups 33-66
                (66, 34),  # agents 666-999: groups 66-99
            ]
    assert runs[True] == runs[False]
