"""The agent runtime end to end: real manager, real worker processes, real gRPC, 10^4 agents."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import grpc
import numpy as np
import pytest

from tests.support import wait_for
from tests.support_worker_rpc import (
    EDUCATION,
    OCCUPATION,
    RULE,
    N,
    Population,
    all_online,
    list_all,
    run_round,
    status_of,
    stubs_of,
)
from worker_server.rpc import worker_pb2 as pb

DEPTHS = {"primary school": 0, "high school": 1, "bachelor": 1, "master": 2, "doctorate": 3}


@pytest.fixture
def manager(module_manager):
    """One manager for the module; each test starts (and stops) worker processes of its own."""
    return module_manager


def test_create_list_delete_and_heartbeats_on_two_workers(manager):
    manager.start_workers(procs=2)
    workers = wait_for(lambda: all_online(manager, 2), timeout=30, what="two workers online")
    channels, stubs = stubs_of(workers)
    population = Population("pop-a")
    other = Population("pop-b", n=10, first_id=2)  # interleaves with pop-a's ids

    replies = population.deploy(stubs)
    assert [r.created for r in replies] == [N // 2, N // 2]
    assert [r.agents for r in replies] == [N // 2, N // 2]
    other.deploy(stubs)

    for k, stub in enumerate(stubs):
        info = stub.GetInfo(pb.GetInfoRequest(), timeout=5)
        assert dict(info.population_agents) == {"pop-a": N // 2, "pop-b": 5}
        assert info.agents == N // 2 + 5 and info.rounds_running == 0
        rows = population.part(k, 2)

        listed = list_all(stub, "pop-a")
        assert [a.id for a in listed] == population.ids[rows].tolist(), "complete and ordered"
        first = listed[0]
        i = rows[0]
        assert first.population_id == "pop-a" and first.persona == population.persona(i)
        assert dict(first.attributes) == {
            "education": EDUCATION[population.education[i]],
            "occupation": OCCUPATION[population.occupation[i]],
        }
        everything = [a.id for a in list_all(stub, limit=333)]
        assert everything == sorted(
            population.ids[rows].tolist() + other.ids[other.part(k, 2)].tolist()
        )
        assert len(set(everything)) == len(everything)

        assert len(stub.ListAgents(pb.ListAgentsRequest(), timeout=5).agents) == 100
        error = status_of(
            lambda s=stub: s.ListAgents(pb.ListAgentsRequest(limit=10_001), timeout=5)
        )
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "limit" in error.details()

    # Heartbeats carry each process's agent count to the manager.
    wait_for(
        lambda: [w["agents"] for w in all_online(manager, 2)] == [N // 2 + 5] * 2,
        timeout=10,
        what="heartbeats reporting the agents",
    )

    doomed = population.ids[population.part(0, 2)][:10].tolist()
    reply = stubs[0].DeleteAgents(pb.DeleteAgentsRequest(ids=pb.AgentIds(ids=doomed)), timeout=10)
    assert (reply.deleted, reply.agents) == (10, N // 2 - 5)
    assert (
        stubs[0]
        .DeleteAgents(pb.DeleteAgentsRequest(ids=pb.AgentIds(ids=doomed)), timeout=10)
        .deleted
        == 0
    )
    for stub, expected in zip(stubs, (N // 2 - 10, N // 2), strict=True):
        reply = stub.DeleteAgents(pb.DeleteAgentsRequest(population_id="pop-a"), timeout=10)
        assert (reply.deleted, reply.agents) == (expected, 5)
        assert (
            stub.DeleteAgents(pb.DeleteAgentsRequest(population_id="pop-a"), timeout=10).deleted
            == 0
        )
        assert list_all(stub, "pop-a") == []
        error = status_of(
            lambda s=stub: s.DeleteAgents(pb.DeleteAgentsRequest(all=False), timeout=5)
        )
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert stub.DeleteAgents(pb.DeleteAgentsRequest(all=True), timeout=10).deleted == 5
        assert stub.DeleteAgents(pb.DeleteAgentsRequest(all=True), timeout=10).deleted == 0
        assert stub.GetInfo(pb.GetInfoRequest(), timeout=5).agents == 0
    wait_for(
        lambda: [w["agents"] for w in all_online(manager, 2)] == [0, 0],
        timeout=10,
        what="heartbeats reporting no agents",
    )
    for channel in channels:
        channel.close()


def check_merged(population, partials, ids, values, bins=101):
    """The merged partial aggregates equal statistics computed from the decisions themselves."""
    count = sum(p.count for p in partials)
    assert count == len(ids) == len(set(ids.tolist()))
    mean = sum(p.sum for p in partials) / count
    std = np.sqrt(sum(p.sum_sq for p in partials) / count - mean**2)
    assert np.isclose(mean, values.mean(), rtol=1e-12)
    assert np.isclose(std, values.std(), rtol=1e-9)
    assert min(p.min for p in partials) == values.min()
    assert max(p.max for p in partials) == values.max()
    histogram = np.sum([np.asarray(p.histogram) for p in partials], axis=0)
    assert histogram.tolist() == np.histogram(values, bins, range=(0, 100))[0].tolist()
    rows = np.searchsorted(population.ids, ids)
    for attribute, codes, categories in (
        ("education", population.education, EDUCATION),
        ("occupation", population.occupation, OCCUPATION),
    ):
        for code, category in enumerate(categories):
            parts = [
                s
                for p in partials
                for s in p.segments
                if (s.attribute, s.category) == (attribute, category)
            ]
            assert len(parts) == len(partials), "every category of every worker"
            mine = values[codes[rows] == code]
            assert sum(s.count for s in parts) == len(mine)
            assert np.isclose(sum(s.sum for s in parts), mine.sum(), rtol=1e-12)
            assert np.isclose(sum(s.sum_sq for s in parts), (mine**2).sum(), rtol=1e-12)


def test_rounds_with_each_policy_merge_to_exact_statistics(manager):
    manager.start_workers(procs=2)
    workers = wait_for(lambda: all_online(manager, 2), timeout=30, what="two workers online")
    channels, stubs = stubs_of(workers)
    population = Population("pop")
    population.deploy(stubs)
    policies = {
        "synthetic": pb.Policy(synthetic=pb.SyntheticPolicy(latency_s=0.5)),
        "level_k": pb.Policy(
            level_k=pb.LevelKPolicy(
                depth_attribute="education", depth_by_category=DEPTHS, default_depth=1, noise_std=3
            )
        ),
    }
    feedback = None
    with ThreadPoolExecutor(2) as pool:
        for number, (name, policy) in enumerate(policies.items(), start=1):
            request = pb.RunRoundRequest(
                round_id=f"round-{name}",
                population_id="pop",
                round=number,
                rule=RULE,
                policy=policy,
                segment_by=["education", "occupation"],
                seed=2024,
            )
            if feedback is not None:
                request.feedback = feedback
            results = list(pool.map(lambda s, r=request: run_round(s, r), stubs))
            ids = np.concatenate([r[0] for r in results])
            values = np.concatenate([r[1] for r in results])
            partials = [r[2] for r in results]
            assert sorted(ids.tolist()) == population.ids.tolist(), name
            assert all(p.n_invalid == 0 and p.n_late == 0 for p in partials)
            check_merged(population, partials, ids, values)
            if name == "synthetic":
                # How concurrently agents wait is `populace bench synthetic`'s, not a timed test.
                assert 45 < values.mean() < 55
            else:
                # Level-k best-responds to last round's winning number: far below it on average.
                assert values.mean() < feedback
            feedback = 2 / 3 * values.mean()

    # Each agent remembers its own decisions, oldest first.
    agent = stubs[1].ListAgents(pb.ListAgentsRequest(limit=1), timeout=5).agents[0]
    assert len(agent.memory) == 2
    for channel in channels:
        channel.close()


def test_cancel_round_and_client_disconnect(manager):
    manager.start_workers(procs=1)
    (worker,) = wait_for(lambda: all_online(manager, 1), timeout=30, what="worker online")
    (channel,), (stub,) = stubs_of([worker])
    Population("pop").deploy([stub])
    # Agents that would wait an hour: only a cancel ends this round before its RPC deadline.
    request = pb.RunRoundRequest(
        round_id="slow",
        population_id="pop",
        round=1,
        rule=RULE,
        policy=pb.Policy(synthetic=pb.SyntheticPolicy(latency_s=3600.0)),
    )
    outcome: dict = {}

    def consume():
        try:
            outcome["messages"] = list(stub.RunRound(request, timeout=60))
        except grpc.RpcError as exc:
            outcome["error"] = exc

    consumer = threading.Thread(target=consume)
    consumer.start()
    wait_for(
        lambda: stub.GetInfo(pb.GetInfoRequest(), timeout=5).rounds_running == 1,
        timeout=30,
        what="the round running",
    )
    duplicate = status_of(lambda: list(stub.RunRound(request, timeout=5)))
    assert duplicate.code() == grpc.StatusCode.ALREADY_EXISTS
    assert stub.CancelRound(pb.CancelRoundRequest(round_id="slow"), timeout=5).cancelled is True
    consumer.join(90)
    assert not consumer.is_alive()
    assert "messages" not in outcome, "no aggregate after a cancel"
    # CANCELLED, not DEADLINE_EXCEEDED: the cancel ended it, not the RPC's deadline.
    assert outcome["error"].code() == grpc.StatusCode.CANCELLED
    assert stub.CancelRound(pb.CancelRoundRequest(round_id="slow"), timeout=5).cancelled is False
    assert stub.GetInfo(pb.GetInfoRequest(), timeout=5).rounds_running == 0

    # A client that goes away mid-round cancels it too.
    call = stub.RunRound(pb.RunRoundRequest(**{**_fields(request), "round_id": "gone"}), timeout=60)
    wait_for(
        lambda: stub.GetInfo(pb.GetInfoRequest(), timeout=5).rounds_running == 1,
        timeout=30,
        what="the round running",
    )
    call.cancel()
    # Its agents wait an hour: the round ends only because its client went away.
    wait_for(
        lambda: stub.GetInfo(pb.GetInfoRequest(), timeout=5).rounds_running == 0,
        timeout=30,
        what="the abandoned round cancelled",
    )
    # The cap was given back: a fresh round runs (with the cap still held it would wait for a
    # slot that never frees, and its RPC deadline would end it without an aggregate).
    quick = pb.RunRoundRequest(**{**_fields(request), "round_id": "quick"})
    quick.policy.synthetic.latency_s = 0.1
    ids, _, aggregate, _, _ = run_round(stub, quick)
    assert aggregate.count == N
    channel.close()


def _fields(message) -> dict:
    return {field.name: value for field, value in message.ListFields()}


def test_capacity_and_malformed_requests_create_nothing(manager):
    manager.extra_env["POPULACE_CAPACITY"] = "6000"
    try:
        manager.start_workers(procs=1)
        (worker,) = wait_for(lambda: all_online(manager, 1), timeout=30, what="worker online")
    finally:
        del manager.extra_env["POPULACE_CAPACITY"]
    assert worker["capacity"] == 6000
    (channel,), (stub,) = stubs_of([worker])
    population = Population("pop")
    rows = np.arange(N)

    error = status_of(lambda: stub.CreateAgents(population.batches(rows), timeout=30))
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "capacity 6000, hosting 0: 6000 more fit, asked for 8000" in error.details()
    assert stub.GetInfo(pb.GetInfoRequest(), timeout=5).agents == 0

    reply = stub.CreateAgents(population.batches(rows[:5000]), timeout=30)
    assert (reply.created, reply.agents, reply.capacity) == (5000, 5000, 6000)
    error = status_of(lambda: stub.CreateAgents(population.batches(rows[5000:7000]), timeout=30))
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "hosting 5000: 1000 more fit, asked for 2000" in error.details()

    # Malformed: batch 2 of a stream has a short attribute column.
    batches = list(population.batches(rows[5000:5900], size=300))
    del batches[2].attributes[0].codes[-1]
    error = status_of(lambda: stub.CreateAgents(iter(batches), timeout=30))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "batch 2: attributes['education'].codes" in error.details()
    # Ids already hosted, in the last batch of an otherwise good stream.
    batches = [*population.batches(rows[5000:5900], size=300), *population.batches(rows[:1])]
    error = status_of(lambda: stub.CreateAgents(iter(batches), timeout=30))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"batch 3: agent_ids: agent {population.ids[0]} is already hosted" in error.details()
    info = stub.GetInfo(pb.GetInfoRequest(), timeout=5)
    assert info.agents == 5000 and dict(info.population_agents) == {"pop": 5000}

    def bad_round(**overrides):
        fields = {
            "round_id": "r",
            "population_id": "pop",
            "round": 1,
            "rule": RULE,
            "policy": pb.Policy(synthetic=pb.SyntheticPolicy()),
            **overrides,
        }
        return status_of(lambda: list(stub.RunRound(pb.RunRoundRequest(**fields), timeout=10)))

    for overrides, text in [
        ({"segment_by": ["income"]}, "segment_by: 'income' is not an attribute"),
        ({"policy": pb.Policy()}, "policy: not set"),
        ({"rule": pb.GameRule(ratio=1, min=10, max=0)}, "rule.min"),
        (
            {"policy": pb.Policy(level_k=pb.LevelKPolicy(depth_attribute="income"))},
            "depth_attribute 'income'",
        ),
    ]:
        error = bad_round(**overrides)
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, text
        assert text in error.details()
    assert all(a.memory == [] for a in list_all(stub, "pop")), "no agent acted"

    # A population with no agents here is an empty round, not an error.
    messages = list(
        stub.RunRound(
            pb.RunRoundRequest(
                round_id="e",
                population_id="elsewhere",
                round=1,
                rule=RULE,
                policy=pb.Policy(synthetic=pb.SyntheticPolicy()),
                histogram_bins=7,
            ),
            timeout=10,
        )
    )
    assert len(messages) == 1 and messages[0].aggregate.count == 0
    assert list(messages[0].aggregate.histogram) == [0] * 7
    channel.close()
