"""Sub-environment pieces the unit tests of rounds share: an agent store of four education
levels, a cohort over all of it, the classic 2/3 rule and a round played to its aggregate."""

from __future__ import annotations

import numpy as np

from worker_server.agents import AgentStore, decode_batch
from worker_server.rounds import Cohort, GameRule, PartialAggregate
from worker_server.rpc import worker_pb2 as pb

EDUCATION = ["primary school", "bachelor", "master", "doctorate"]
CLASSIC = GameRule(ratio=2 / 3, offset=0.0, min=0.0, max=100.0)


def make_store(ids, population_id="p", capacity=1_000_000):
    store = AgentStore(capacity)
    ids = np.asarray(ids, dtype=np.int64)
    with store.upload() as up:
        for i, start in enumerate(range(0, len(ids), 10_000)):
            part = ids[start : start + 10_000]
            up.add(
                decode_batch(
                    pb.AgentBatch(
                        population_id=population_id,
                        agent_ids=part.tolist(),
                        attributes=[
                            pb.AttributeColumn(
                                name="education", categories=EDUCATION, codes=(part % 4).tolist()
                            )
                        ],
                    ),
                    i,
                )
            )
        up.commit()
    return store


def cohort(store, population_id="p"):
    population = store.population(population_id)
    return Cohort(population, np.arange(len(population)))


async def collect(subenv, spec):
    chunks, aggregate = [], None
    async for out in subenv.run(spec):
        assert aggregate is None, "the aggregate comes last"
        if isinstance(out, PartialAggregate):
            aggregate = out
        else:
            chunks.append(out)
    return chunks, aggregate
