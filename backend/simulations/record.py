"""A run's reproducibility record: what besides its config and seed decides what it did.

Kept in `simulations.record` and shown with the run (and carried by its exports):
- populace_version: the package that played it;
- placement: which worker processes hosted how many of its agents when it started (or last
  resumed) in this manager;
- endpoints: per LLM endpoint, the model ids its /v1/models listed at the run's probe;
- rerun_of: the run it repeats, when it was launched by "re-run".
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import async_sessionmaker

from backend.populations import store as population_store
from backend.simulations import store
from backend.workers import registry
from worker_server.version import populace_version


async def placement(sessionmaker: async_sessionmaker, population_id: int) -> list[dict[str, Any]]:
    """[{worker_id, node, address, agents}] by worker id; agents not placed have worker_id null."""
    async with sessionmaker() as session:
        counts = await population_store.agents_per_worker(session, population_id)
        ids = [w for w in counts if w is not None]
        workers = await registry.by_ids(session, ids)
    rows = []
    for worker_id in sorted(counts, key=lambda w: (w is None, w or 0)):
        worker = workers.get(worker_id) if worker_id is not None else None
        rows.append(
            {
                "worker_id": worker_id,
                "node": worker.node if worker else None,
                "address": worker.address if worker else None,
                "agents": counts[worker_id],
            }
        )
    return rows


class KeepRecord:
    """A round listener that writes the record once, when the first round of this start of the
    run begins (after the LLM probe, so the served models are known)."""

    def __init__(self, sessionmaker: async_sessionmaker, population_id: int) -> None:
        self.sessionmaker = sessionmaker
        self.population_id = population_id
        self._written = False

    async def round_started(self, env, round_number: int) -> None:
        if self._written:
            return
        async with self.sessionmaker() as session:
            simulation = await store.get_simulation(session, env.spec.simulation_id)
            kept = dict(simulation.record or {})
        record = {
            **kept,
            "populace_version": populace_version(),
            "placement": await placement(self.sessionmaker, self.population_id),
            "endpoints": [
                {"base_url": base_url, "model": model, "served_models": served}
                for (base_url, model), served in sorted(env.served_models.items())
            ]
            or kept.get("endpoints", []),
        }
        async with self.sessionmaker() as session:
            await store.set_record(session, env.spec.simulation_id, record)
        # Only once written: a try cut by a database outage is made again whole.
        self._written = True

    def decisions_arrived(self, env, round_number: int, answered: int) -> None:
        pass

    async def round_completed(self, env, result, decisions) -> None:
        pass
