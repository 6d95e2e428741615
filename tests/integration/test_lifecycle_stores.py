"""Random sequences of status writes through the stores, on SQLite and on Postgres: each store
moves a row exactly when its lifecycle's table allows it (backend/lifecycles/), and otherwise
leaves it as it was."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from backend.db.migrate import upgrade
from backend.db.session import make_engine, make_sessionmaker
from backend.lifecycles import TransitionRefused
from backend.lifecycles import population as population_lifecycle
from backend.lifecycles import simulation as simulation_lifecycle
from backend.lifecycles import sweep as sweep_lifecycle
from backend.populations import store as population_store
from backend.simulations import store as simulation_store
from backend.sweeps import store as sweep_store

WALKS = settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
RESUME = "resume"


@pytest.fixture
def sessions(database_url):
    upgrade(database_url)
    engine = make_engine(database_url)
    yield make_sessionmaker(engine)
    asyncio.run(engine.dispose())


def _run(sessions, walk):
    """One walk on the fixture's database (each walk makes its own rows)."""

    async def go():
        await walk()
        # The engine's pool belongs to this event loop: close its connections with it.
        await sessions.kw["bind"].dispose()

    asyncio.run(go())


@WALKS
@given(steps=st.lists(st.sampled_from((*simulation_lifecycle.SIMULATION_STATUSES, RESUME))))
def test_a_simulations_status_follows_its_table(sessions, steps):
    async def walk():
        async with sessions() as s:
            population = await population_store.create_population(s, "walk", 0, 1, {})
            run = await simulation_store.create_simulation(
                s,
                population_id=population.id,
                name="walk",
                rounds=3,
                config={"rounds": 3},
                seed=1,
                models=[],
                version="test",
            )
        status = simulation_lifecycle.PENDING
        for step in steps:
            async with sessions() as s:
                if step == RESUME:
                    moved = await simulation_store.reactivate(s, run.id)
                    allowed = status in simulation_lifecycle.RESUMABLE
                    target = simulation_lifecycle.RUNNING
                else:
                    moved = await simulation_store.set_status(s, run.id, step)
                    allowed = status in simulation_lifecycle.ACTIVE and (
                        simulation_lifecycle.MACHINE.allows(status, step)
                    )
                    target = step
                assert (moved is not None) == allowed, (status, step)
                if allowed:
                    simulation_lifecycle.check_transition(status, target)
                    status = target
                    assert moved.status == target
                    assert (moved.finished_at is not None) == simulation_lifecycle.is_final(target)
                assert (await simulation_store.get_simulation(s, run.id)).status == status

    _run(sessions, walk)


@WALKS
@given(steps=st.lists(st.sampled_from(population_lifecycle.POPULATION_STATUSES)))
def test_a_populations_status_follows_its_table(sessions, steps):
    async def walk():
        async with sessions() as s:
            population = await population_store.create_population(s, "walk", 0, 1, {})
        status = population_lifecycle.DEPLOYING
        for step in steps:
            async with sessions() as s:
                if population_lifecycle.MACHINE.allows(status, step):
                    moved = await population_store.set_status(s, population.id, step)
                    status = step
                    assert moved.status == step
                else:
                    with pytest.raises(TransitionRefused) as refused:
                        await population_store.set_status(s, population.id, step)
                    assert f"from {status} to {step}" in refused.value.detail
                assert (await population_store.get_population(s, population.id)).status == status

    _run(sessions, walk)


@WALKS
@given(steps=st.lists(st.sampled_from(sweep_lifecycle.SWEEP_STATUSES), max_size=4))
def test_a_sweeps_status_follows_its_table(sessions, steps):
    async def walk():
        async with sessions() as s:
            made = await sweep_store.create_sweep(
                s, name="walk", mode="sequence", config={}, runs=1
            )
        status = sweep_lifecycle.RUNNING
        for step in steps:
            async with sessions() as s:
                finished = await sweep_store.finish(s, made.id, step)
                allowed = sweep_lifecycle.MACHINE.allows(status, step)
                assert (finished is not None) == allowed
                status = step if allowed else status
                assert (await sweep_store.get_sweep(s, made.id)).status == status

    _run(sessions, walk)
