"""The fan-out's liveness watch (`gone`) against a real worker process: whichever way a worker's
stream ends, its watch is stopped and awaited (an error on its way out is logged, never left
as "Task exception was never retrieved"), and a round cancelled from above stops its streams
too (no decision arrives after the cancel)."""

from __future__ import annotations

import asyncio
import gc
import logging
import uuid

import numpy as np

from backend.rounds.fanout import DecisionCollector, run_round
from backend.workers.grpc_client import AgentColumns
from worker_server.rpc import worker_pb2 as pb

RULE = pb.GameRule(ratio=0.5, offset=5, min=0, max=100)


async def _population(client, size: int) -> AgentColumns:
    population = AgentColumns(
        population_id=f"pop-{uuid.uuid4().hex[:6]}",
        ids=np.arange(size, dtype=np.int64),
        codes={},
        categories={},
    )
    await client.create_agents(population)
    return population


def _request(population: AgentColumns, latency_s: float) -> pb.RunRoundRequest:
    return pb.RunRoundRequest(
        round_id=uuid.uuid4().hex,
        population_id=population.population_id,
        round=1,
        rule=RULE,
        policy=pb.Policy(synthetic=pb.SyntheticPolicy(latency_s=latency_s)),
        seed=3,
    )


async def test_a_watch_that_fails_while_it_is_stopped_is_awaited_and_logged(client, caplog):
    population = await _population(client, 200)
    unretrieved: list[dict] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: unretrieved.append(context))
    watching = asyncio.Event()

    async def gone(_address: str) -> None:
        # Like a store read cut by the cancel whose clean-up fails (PendingRollbackError).
        watching.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise RuntimeError("the connection could not be rolled back") from None

    try:
        with caplog.at_level(logging.WARNING, logger="backend.rounds.fanout"):
            result = await run_round(
                [client], _request(population, 0.2), tolerate_failures=True, gone=gone
            )
        assert watching.is_set()
        assert result.stats.n_valid + result.stats.n_invalid == 200 and not result.failures
        for _ in range(5):  # let any task left behind finish, then be collected
            await asyncio.sleep(0)
        gc.collect()
    finally:
        loop.set_exception_handler(None)
    assert unretrieved == [], unretrieved
    assert "could not be rolled back" in caplog.text


async def test_a_round_cancelled_from_above_stops_its_streams(client):
    population = await _population(client, 200)
    collector = DecisionCollector()

    async def gone(_address: str) -> None:
        await asyncio.Event().wait()  # the worker stays live

    round_task = asyncio.create_task(
        run_round(
            [client],
            _request(population, 2.0),
            on_decisions=collector,
            tolerate_failures=True,
            gone=gone,
        )
    )
    for _ in range(600):  # polls: a hang guard of about 30 s, not a speed bound
        if (await client.info()).rounds_running == 1:
            break
        await asyncio.sleep(0.05)
    round_task.cancel()
    try:
        await round_task
    except asyncio.CancelledError:
        pass
    # The worker's round ends (cancelled with the stream, not played out)...
    for _ in range(600):
        if (await client.info()).rounds_running == 0:
            break
        await asyncio.sleep(0.05)
    assert (await client.info()).rounds_running == 0
    await asyncio.sleep(0.1)  # a decision still on its way would land meanwhile
    # ...and not one of its decisions reached the cancelled round's callback.
    assert collector.ids == []
