"""Rounds re-run for some agents, and agents moved with their memory: real worker processes,
real gRPC (the manager only registers the workers)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import grpc
import numpy as np

from backend.workers.grpc_client import AgentColumns, AgentMemory
from tests.support import wait_for, worker_client
from tests.support_worker_rpc import (
    EDUCATION,
    RULE,
    Population,
    all_online,
    list_all,
    run_round,
    status_of,
    stubs_of,
)
from worker_server.rpc import worker_pb2 as pb

DEPTHS = {"primary school": 0, "high school": 1, "bachelor": 1, "master": 2, "doctorate": 3}
LEVEL_K = pb.Policy(
    level_k=pb.LevelKPolicy(
        depth_attribute="education", depth_by_category=DEPTHS, default_depth=1, noise_std=4
    )
)


def round_request(number, *, only=None, round_id=None, feedback=None):
    request = pb.RunRoundRequest(
        round_id=round_id or f"round-{number}",
        population_id="pop",
        round=number,
        rule=RULE,
        policy=LEVEL_K,
        seed=99,
        simulation_id="sim-1",
    )
    if feedback is not None:
        request.feedback = feedback
    if only is not None:
        request.only.ids.extend(np.asarray(only).tolist())
    return request


def play(stubs, request):
    """Run the round on every stub; per worker: (ids, values, aggregate)."""
    with ThreadPoolExecutor(len(stubs)) as pool:
        results = list(pool.map(lambda s: run_round(s, request), stubs))
    return [(ids, values, aggregate) for ids, values, aggregate, _, _ in results]


def decided(results) -> dict[int, float]:
    return {
        i: v
        for ids, values, _ in results
        for i, v in zip(ids.tolist(), values.tolist(), strict=True)
    }


def memory_of(stub) -> dict[int, list[float]]:
    return {a.id: list(a.memory) for a in list_all(stub, "pop")}


def test_a_subset_round_returns_exactly_the_listed_hosted_agents_decisions(manager):
    manager.start_workers(procs=2)
    workers = wait_for(lambda: all_online(manager, 2), timeout=30, what="two workers online")
    channels, stubs = stubs_of(workers)
    population = Population("pop")
    population.deploy(stubs)
    hosted = [set(population.ids[population.part(k, 2)].tolist()) for k in range(2)]

    full = play(stubs, round_request(1))
    everyone = decided(full)
    assert sorted(everyone) == population.ids.tolist()
    before = [memory_of(stub) for stub in stubs]

    # The manager re-runs round 1 for some agents: a random share of each worker's, plus ids
    # hosted nowhere; unsorted, with a repeat.
    rng = np.random.default_rng(3)
    listed = rng.choice(population.ids, 1500, replace=False)
    strangers = np.array([-7, 2, 10**12])  # population ids are 1 mod 3
    only = rng.permutation(np.concatenate([listed, strangers, listed[:5]]))
    subset = play(stubs, round_request(1, only=only, round_id="round-1-again"))
    for k, (ids, values, aggregate) in enumerate(subset):
        mine = sorted(set(listed.tolist()) & hosted[k])
        assert sorted(ids.tolist()) == mine, "exactly the listed agents hosted there"
        assert values.tolist() == [everyone[i] for i in ids.tolist()], "as in the full round"
        assert (aggregate.count, aggregate.n_late, aggregate.n_invalid) == (len(mine), 0, 0)
        assert np.isclose(aggregate.sum, values.sum())
        assert sum(s.count for s in aggregate.segments) == 0  # no segment_by asked
    # Round 1 was replayed, not appended: every agent still remembers one decision, its own.
    assert [memory_of(stub) for stub in stubs] == before
    assert all(len(m) == 1 for m in before[0].values())

    # The next round appends for everyone.
    feedback = 2 / 3 * np.mean(list(everyone.values()))
    play(stubs, round_request(2, feedback=feedback))
    assert all(len(m) == 2 for stub in stubs for m in memory_of(stub).values())
    for channel in channels:
        channel.close()


def test_agents_moved_with_their_memory_replay_the_round_they_lost(manager):
    manager.start_workers(procs=2)
    workers = wait_for(lambda: all_online(manager, 2), timeout=30, what="two workers online")
    channels, stubs = stubs_of(workers)
    population = Population("pop", n=4000)
    population.deploy(stubs)
    moving_rows = population.part(1, 2)
    moving = population.ids[moving_rows]

    rounds = {}
    feedback = None
    for number in (1, 2, 3):
        rounds[number] = decided(play(stubs, round_request(number, feedback=feedback)))
        feedback = 2 / 3 * np.mean(list(rounds[number].values()))
    undisturbed = memory_of(stubs[1])
    assert all(len(m) == 3 for m in undisturbed.values())

    # Worker 1 is lost during round 3: its agents move to worker 0 with what the manager
    # persisted of them (rounds 1 and 2), through the manager's own encoder.
    assert stubs[1].DeleteAgents(pb.DeleteAgentsRequest(population_id="pop"), timeout=10).deleted
    columns = AgentColumns(
        "pop",
        moving,
        codes={"education": population.education[moving_rows]},
        categories={"education": EDUCATION},
        personas=[population.persona(i) for i in moving_rows.tolist()],
        memory=AgentMemory(
            "sim-1", [1, 2], np.array([[rounds[r][i] for r in (1, 2)] for i in moving.tolist()])
        ),
    )

    async def move():
        async with worker_client(workers[0]["address"]) as client:
            # Small batches: the memory is sliced along with every other column.
            return await client.create_agents(columns.take(np.arange(len(moving))), batch_size=300)

    assert asyncio.run(move()).created == len(moving)
    # Round 3 again, for the moved agents only, where they are now.
    feedback = 2 / 3 * np.mean(list(rounds[2].values()))
    ((ids, values, aggregate),) = play(
        [stubs[0]], round_request(3, only=moving, round_id="round-3-again", feedback=feedback)
    )
    assert sorted(ids.tolist()) == moving.tolist() and aggregate.count == len(moving)
    assert values.tolist() == [rounds[3][i] for i in ids.tolist()]
    # They remember exactly what they did where they were; the agents that stayed are untouched.
    here = memory_of(stubs[0])
    assert {i: here[i] for i in moving.tolist()} == undisturbed
    assert all(len(here[i]) == 3 for i in population.ids[population.part(0, 2)].tolist())

    # Memory that does not fit its agents is refused, and nothing is created.
    bad = AgentColumns(
        "pop", np.array([10**9]), memory=AgentMemory("sim-1", [1, 2], np.ones((1, 2)))
    )
    message = next(iter(bad.batches(10)))
    del message.memory.values[-1]
    error = status_of(lambda: stubs[0].CreateAgents(iter([message]), timeout=10))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "batch 0: memory.values: has 1 values" in error.details()
    assert stubs[0].GetInfo(pb.GetInfoRequest(), timeout=5).agents == 4000
    for channel in channels:
        channel.close()
