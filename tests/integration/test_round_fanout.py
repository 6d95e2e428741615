"""The manager-side fan-out against real worker processes: the merged aggregate equals the
statistics of the decisions that streamed back."""

from __future__ import annotations

import asyncio
import uuid

import numpy as np
import pytest

from backend.rounds.fanout import DecisionCollector, RoundFailed, cancel_round, run_round
from backend.workers.grpc_client import AgentColumns, WorkerClient
from tests.support import wait_for, worker_client
from worker_server.rpc import worker_pb2 as pb

AGENTS = 10_000
EDUCATION = ["primary school", "high school", "bachelor", "master", "doctorate"]
RULE = pb.GameRule(ratio=0.5, offset=5, min=0, max=100)


@pytest.fixture(scope="module")
def shared_workers(module_manager_factory):
    """Two worker processes, started once for the module's tests."""
    manager = module_manager_factory().start()
    manager.start_workers(procs=2)
    online = wait_for(
        lambda: (
            (ws := [w for w in manager.workers() if w["state"] == "online"]) and len(ws) == 2 and ws
        ),
        timeout=30,
        what="two workers online",
    )
    return [w["address"] for w in online]


@pytest.fixture
async def workers(shared_workers):
    """The shared workers' addresses; they are emptied after each test (every test deploys the
    same agent ids)."""
    yield shared_workers
    for address in shared_workers:
        async with worker_client(address) as client:
            await client.delete_agents(all=True)


async def _deploy(addresses: list[str]) -> tuple[list[WorkerClient], AgentColumns]:
    rng = np.random.default_rng(11)
    population = AgentColumns(
        population_id=f"pop-{uuid.uuid4().hex[:6]}",
        ids=np.arange(1, AGENTS + 1, dtype=np.int64) * 7,  # sparse ids, as a store would give
        codes={"education": rng.integers(0, len(EDUCATION), AGENTS, dtype=np.uint32)},
        categories={"education": EDUCATION},
    )
    clients = [worker_client(a) for a in addresses]
    # An uneven split: placement need not be balanced for the merge to be exact.
    shares = [population.take(slice(0, 3_000)), population.take(slice(3_000, AGENTS))]
    await asyncio.gather(
        *(c.create_agents(s, batch_size=2_500) for c, s in zip(clients, shares, strict=True))
    )
    return clients, population


def _request(population: AgentColumns, policy: pb.Policy, **kw) -> pb.RunRoundRequest:
    return pb.RunRoundRequest(
        round_id=uuid.uuid4().hex,
        population_id=population.population_id,
        round=1,
        rule=RULE,
        policy=policy,
        seed=5,
        segment_by=["education"],
        **kw,
    )


LEVEL_K = pb.Policy(
    level_k=pb.LevelKPolicy(
        depth_attribute="education",
        depth_by_category={
            "primary school": 0,
            "high school": 1,
            "bachelor": 1,
            "master": 2,
            "doctorate": 3,
        },
        noise_std=4.0,
    )
)
SYNTHETIC = pb.Policy(synthetic=pb.SyntheticPolicy(latency_s=0.05))


@pytest.mark.parametrize("policy", [LEVEL_K, SYNTHETIC], ids=["level-k", "synthetic"])
async def test_merged_aggregate_equals_statistics_of_the_decisions(workers, policy):
    clients, population = await _deploy(workers)
    try:
        collector = DecisionCollector()
        result = await run_round(clients, _request(population, policy), on_decisions=collector)
    finally:
        for c in clients:
            await c.close()
    ids, values = collector.arrays()
    stats = result.stats

    assert sorted(ids.tolist()) == population.ids.tolist(), "every agent answered exactly once"
    assert result.decisions_received == AGENTS == stats.n_valid + stats.n_invalid + stats.n_late
    valid = values[~np.isnan(values)]
    assert stats.n_valid == len(valid)
    assert stats.mean == pytest.approx(valid.mean(), rel=1e-9)
    assert stats.std == pytest.approx(valid.std(), rel=1e-6)
    assert (stats.min, stats.max) == (valid.min(), valid.max())
    assert stats.histogram == np.histogram(valid, bins=101, range=(0, 100))[0].tolist()
    assert stats.target == pytest.approx(0.5 * valid.mean() + 5)

    code_of = dict(
        zip(population.ids.tolist(), population.codes["education"].tolist(), strict=True)
    )
    codes = np.asarray([code_of[i] for i in ids.tolist()])
    for code, name in enumerate(EDUCATION):
        mine = values[codes == code]
        mine = mine[~np.isnan(mine)]
        assert stats.segments["education"][name].count == len(mine)
        assert stats.segments["education"][name].mean == pytest.approx(mine.mean(), rel=1e-9)
    # Streamed in packed batches, not a message per agent.
    assert len(collector.ids) <= 2 * -(-AGENTS // 10_000) + 2


async def test_a_worker_error_fails_the_round_naming_the_worker(workers):
    clients, population = await _deploy(workers)
    try:
        bad = _request(population, LEVEL_K)
        bad.segment_by.append("shoe size")
        with pytest.raises(RoundFailed) as err:
            await run_round(clients, bad)
    finally:
        for c in clients:
            await c.close()
    assert "INVALID_ARGUMENT" in str(err.value) and "shoe size" in str(err.value)
    assert any(address in str(err.value) for address in workers)


async def test_cancel_stops_every_workers_round(workers):
    clients, population = await _deploy(workers)
    try:
        request = _request(population, pb.Policy(synthetic=pb.SyntheticPolicy(latency_s=30)))
        running = asyncio.create_task(run_round(clients, request))
        # Cancel once every worker runs it (its agents wait 30 s: only the cancel ends it).
        for _ in range(600):  # polls: a hang guard of about 30 s, not a speed bound
            if all([(await c.info()).rounds_running == 1 for c in clients]):
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail("the round never ran on every worker")
        assert await cancel_round(clients, request.round_id) == len(clients)
        with pytest.raises(RoundFailed, match="CANCELLED"):
            await asyncio.wait_for(running, timeout=10)
        infos = [await c.info() for c in clients]
    finally:
        for c in clients:
            await c.close()
    assert all(i.rounds_running == 0 for i in infos)
