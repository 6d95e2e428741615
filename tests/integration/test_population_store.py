"""The population store and its migration, on SQLite and on Postgres."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from sqlalchemy import inspect

from backend.db.migrate import current, downgrade, upgrade
from backend.db.session import make_engine, make_sessionmaker
from backend.events.hub import EventHub
from backend.populations import store
from backend.populations.config import PopulationConfig
from backend.populations.keeper import PlacementKeeper
from backend.populations.personas import render_template
from backend.populations.sampling import sample
from backend.workers import registry
from backend.workers.liveness import Liveness
from backend.workers.schemas import RegisterRequest

EDUCATION = ("primary school", "high school", "bachelor", "doctorate")


def _schema(url: str) -> tuple[set[str], set[str]]:
    async def read():
        engine = make_engine(url)
        async with engine.connect() as conn:

            def names(c):
                insp = inspect(c)
                tables = set(insp.get_table_names())
                indexes = (
                    {i["name"] for i in insp.get_indexes("agents")} if "agents" in tables else set()
                )
                return tables, indexes

            result = await conn.run_sync(names)
        await engine.dispose()
        return result

    return asyncio.run(read())


def test_migration_0002_up_down_up(database_url):
    upgrade(database_url, "0002_populations")
    assert current(database_url) == "0002_populations"
    tables, indexes = _schema(database_url)
    assert {"workers", "populations", "agents"} <= tables
    assert {"ix_agents_population_id_id", "ix_agents_worker_id_id"} <= indexes
    assert ("ix_agents_attributes" in indexes) == database_url.startswith("postgresql")
    downgrade(database_url, "0001_workers")
    assert current(database_url) == "0001_workers"
    tables, _ = _schema(database_url)
    assert "agents" not in tables and "populations" not in tables and "workers" in tables
    upgrade(database_url, "0002_populations")
    assert current(database_url) == "0002_populations"


@pytest.fixture
async def sessions(database_url):
    await asyncio.to_thread(upgrade, database_url)
    engine = make_engine(database_url)
    yield make_sessionmaker(engine)
    await engine.dispose()


async def _workers(s, n: int) -> list[int]:
    liveness = _liveness()
    return [
        (
            await registry.register(
                s,
                liveness,
                RegisterRequest(
                    node="n",
                    address=f"127.0.0.1:{6000 + i}",
                    pid=100 + i,
                    capacity=10**6,
                    version="t",
                    rpc_secret="secret-of-test-worker",
                ),
            )
        ).id
        for i in range(n)
    ]


async def _deploy(s, size: int, workers: list[int], *, chunk: int = 3000, name: str = "p"):
    """A population with education cycling through EDUCATION and round-robin placement."""
    population = await store.create_population(s, name, size, 7, {"size": size})
    for start in range(0, size, chunk):
        idx = np.arange(start, min(start + chunk, size))
        columns = {
            "education": np.array(EDUCATION, dtype=object)[idx % len(EDUCATION)],
            "age": 20 + idx % 50,
        }
        personas = [f"persona {i}" for i in idx.tolist()]
        placed = np.asarray(workers)[idx % len(workers)]
        await store.bulk_insert_agents(s, population.id, start, columns, personas, placed)
    return population


async def _all_pages(s, limit: int, **filters) -> list[int]:
    seen, after = [], None
    while True:
        rows, after = await store.page_agents(s, after=after, limit=limit, **filters)
        seen += [a.id for a in rows]
        if after is None:
            return seen


async def test_bulk_insert_then_paging_returns_every_agent_once_in_order(sessions):
    async with sessions() as s:
        workers = await _workers(s, 3)
        population = await _deploy(s, 10_000, workers)
        ids = await _all_pages(s, 700, population_id=population.id)
        assert ids == [store.agent_id(population.id, i) for i in range(10_000)]
        agent = await store.get_agent(s, store.agent_id(population.id, 4242))
        assert agent.attributes == {"education": EDUCATION[4242 % 4], "age": 20 + 4242 % 50}
        assert agent.persona == "persona 4242"
        assert agent.worker_id == workers[4242 % 3] and agent.orphaned is False
        assert store.population_of(agent.id) == population.id
        with pytest.raises(store.UnknownAgent):
            await store.get_agent(s, store.agent_id(population.id, 10_000))


async def test_insert_accepts_one_dict_per_agent_and_unplaced_agents(sessions):
    async with sessions() as s:
        population = await store.create_population(s, "dicts", 2, 1, {})
        n = await store.bulk_insert_agents(
            s, population.id, 0, [{"education": "doctorate", "age": 41}, {"x": 1.5}], ["a", "b"]
        )
        assert n == 2
        rows, after = await store.page_agents(s, population_id=population.id)
        assert after is None
        assert [(r.attributes, r.worker_id) for r in rows] == [
            ({"education": "doctorate", "age": 41}, None),
            ({"x": 1.5}, None),
        ]
        assert await store.agents_per_worker(s, population.id) == {None: 2}


async def test_paging_is_stable_under_inserts(sessions):
    async with sessions() as s:
        workers = await _workers(s, 2)
        first = await _deploy(s, 2000, workers, name="first")
        second = await store.create_population(s, "second", 4000, 1, {})
        seen, after, inserted = [], None, 0
        while True:
            rows, after = await store.page_agents(s, after=after, limit=300)
            seen += [a.id for a in rows]
            if inserted < 4000:  # another population grows between every two pages
                await store.bulk_insert_agents(
                    s, second.id, inserted, {"education": ["doctorate"] * 500}, ["p"] * 500
                )
                inserted += 500
            if after is None:
                break
        assert len(seen) == len(set(seen)) and seen == sorted(seen)
        expected = [store.agent_id(first.id, i) for i in range(2000)]
        assert seen[:2000] == expected
        # The later population's rows sort after the first's, so the walk reached them too.
        assert set(seen[2000:]) <= {store.agent_id(second.id, i) for i in range(4000)}


async def test_filters_by_population_worker_and_attribute(sessions):
    async with sessions() as s:
        workers = await _workers(s, 3)
        a = await _deploy(s, 1200, workers, name="a")
        b = await _deploy(s, 800, workers[:2], name="b")
        assert len(await _all_pages(s, 250, population_id=b.id)) == 800
        on_w2 = await _all_pages(s, 100, worker_id=workers[2])
        assert on_w2 == [store.agent_id(a.id, i) for i in range(2, 1200, 3)]
        doctors_a = await _all_pages(
            s, 64, population_id=a.id, attribute=("education", "doctorate")
        )
        assert doctors_a == [store.agent_id(a.id, i) for i in range(3, 1200, 4)]
        doctors = await _all_pages(s, 1000, attribute=("education", "doctorate"))
        assert len(doctors) == 300 + 200
        aged_30 = await _all_pages(s, 1000, population_id=b.id, attribute=("age", 30))
        assert aged_30 == [store.agent_id(b.id, i) for i in range(10, 800, 50)]
        both = await _all_pages(
            s, 7, population_id=a.id, worker_id=workers[0], attribute=("education", "bachelor")
        )
        assert both == [store.agent_id(a.id, i) for i in range(1200) if i % 3 == 0 and i % 4 == 2]
        assert await store.agents_per_worker(s, a.id) == {w: 400 for w in workers}
        assert await store.agents_per_worker(s, b.id) == {workers[0]: 400, workers[1]: 400}


async def test_delete_leaves_zero_agents_and_a_deleted_population(sessions):
    async with sessions() as s:
        workers = await _workers(s, 2)
        gone = await _deploy(s, 5000, workers, name="gone")
        kept = await _deploy(s, 300, workers, name="kept")
        await store.set_status(s, kept.id, "deployed", counts={"education": {"doctorate": 75}})
        assert await store.delete_population_rows(s, gone.id, chunk=700) == 5000
        assert await store.count_agents(s, gone.id) == 0
        assert (await store.get_population(s, gone.id)).status == "deleted"
        assert await store.count_agents(s, kept.id) == 300
        assert await store.delete_population_rows(s, gone.id) == 0  # idempotent
        undone = await _deploy(s, 100, workers, name="undone")  # a failed deploy's undo
        assert await store.delete_population_rows(s, undone.id, final_status="failed") == 100
        assert (await store.get_population(s, undone.id)).status == "failed"
        with pytest.raises(store.PopulationNotDeploying):
            await store.bulk_insert_agents(s, gone.id, 0, [{}], ["late"])
        listed, _ = await store.list_populations(s)
        assert [p.id for p in listed] == [kept.id, undone.id]
        assert listed[0].counts == {"education": {"doctorate": 75}}
        everything, _ = await store.list_populations(s, include_deleted=True)
        assert [p.id for p in everything] == [gone.id, kept.id, undone.id]
        page, after = await store.list_populations(s, include_deleted=True, limit=1)
        assert [p.id for p in page] == [gone.id] and after == gone.id


async def test_orphans_of_an_offline_worker_are_kept_until_it_returns(sessions):
    async with sessions() as s:
        workers = await _workers(s, 3)
        offline = workers[1]
        population = await _deploy(s, 3000, workers)
        other = await _deploy(s, 300, workers, name="other")
        assert await store.mark_orphaned(s, population.id, [offline]) == 1000
        assert await store.delete_population_rows(s, population.id, chunk=400) == 2000
        assert (await store.get_population(s, population.id)).status == "deleted"
        assert await store.count_agents(s, population.id) == 1000
        assert await _all_pages(s, 500, population_id=population.id) == []
        orphans = await _all_pages(s, 500, worker_id=offline, orphaned=True)
        assert orphans == [store.agent_id(population.id, i) for i in range(1, 3000, 3)]
        assert await store.orphans_on_worker(s, offline) == [(population.id, 1000)]
        assert await store.orphans_on_worker(s, workers[0]) == []
        # The worker came back and removed the agents: drop the rows.
        assert (
            await store.delete_on_worker(s, population.id, offline, orphaned=True, chunk=300)
            == 1000
        )
        assert await store.orphans_on_worker(s, offline) == []
        assert await store.count_agents(s, population.id) == 0
        assert await store.count_agents(s, other.id) == 300


async def test_orphans_of_a_removed_worker_are_reclaimed_by_the_reaper(sessions):
    """Nobody is left to take them off that worker: the rows go, never left for good."""
    from backend.populations.cleanup import reap_once

    async with sessions() as s:
        workers = await _workers(s, 2)
        population = await _deploy(s, 1000, workers)
        assert await store.mark_orphaned(s, population.id, [workers[0]]) == 500
        await store.delete_population_rows(s, population.id)
        assert await store.count_agents(s, population.id) == 500
    await reap_once(sessions)  # worker 0 is still live (offline at most): its orphans wait
    async with sessions() as s:
        assert await store.count_agents(s, population.id) == 500
        await registry.remove(s, _liveness(), workers[0])
    await reap_once(sessions)
    async with sessions() as s:
        assert await store.count_agents(s, population.id) == 0


async def test_moving_a_workers_agents_and_reading_them_back_for_a_rebuild(sessions):
    """What a repair reads and writes: one worker's agents (interleaved with the others' here),
    their personas in id order over several keyset pages, and their placement moved."""
    async with sessions() as s:
        workers = await _workers(s, 3)
        population = await _deploy(s, 3000, workers)
        gone = workers[1]
        ids = await store.agent_ids_on(s, population.id, [gone])
        assert ids.tolist() == [store.agent_id(population.id, i) for i in range(1, 3000, 3)]
        personas = await store.personas_of(s, ids, page=70)
        assert personas == [f"persona {i}" for i in range(1, 3000, 3)]
        assert await store.personas_of(s, ids[:0]) == []
        with pytest.raises(store.UnknownAgent):
            await store.personas_of(s, np.append(ids, store.agent_id(population.id, 5000)))

        # Half to worker 0, the rest placed nowhere; only the gone worker's rows move.
        half = len(ids) // 2
        assert await store.move_agents(s, population.id, ids[:half], [gone], workers[0]) == half
        assert await store.move_agents(s, population.id, ids[half:], [gone], None) == half
        assert (await store.agent_ids_on(s, population.id, [gone])).size == 0
        unplaced = await store.agent_ids_on(s, population.id, [None])
        assert unplaced.tolist() == ids[half:].tolist()
        per_worker = await store.agents_per_worker(s, population.id)
        assert per_worker == {workers[0]: 1000 + half, workers[2]: 1000, None: half}
        assert await store.agents_on_workers(s, [workers[0], gone]) == {workers[0]: 1000 + half}
        assert await store.set_hosted(s, population.id, 0) is None, "only once deployed"
        await store.set_status(s, population.id, "deployed", hosted=3000)
        placed = await store.set_hosted(s, population.id, 3000 - half)
        assert (placed.status, placed.hosted) == ("degraded", 3000 - half)
        whole = await store.set_hosted(s, population.id, 3000)
        assert (whole.status, whole.hosted) == ("deployed", 3000)


async def test_placement_is_a_few_id_ranges_that_a_move_cuts_and_merges(sessions):
    """Contiguous shares written in chunks stay one range per worker; moving a slice of one
    worker's agents cuts its range and merges the slice into its neighbour's."""
    async with sessions() as s:
        workers = await _workers(s, 3)
        population = await store.create_population(s, "ranges", 3000, 7, {"size": 3000})
        share = np.repeat(np.asarray(workers), 1000)
        for start in range(0, 3000, 700):  # chunks that do not line up with the shares
            end = min(start + 700, 3000)
            personas = [f"persona {i}" for i in range(start, end)]
            columns = {"age": np.arange(start, end)}
            await store.bulk_insert_agents(
                s, population.id, start, columns, personas, share[start:end]
            )
        lo = store.agent_id(population.id, 0)
        assert await store.placement_runs(s, population.id) == [
            (lo, workers[0]),
            (lo + 1000, workers[1]),
            (lo + 2000, workers[2]),
        ]
        # The first half of worker 1's agents joins worker 0's range.
        ids = await store.agent_ids_on(s, population.id, [workers[1]])
        assert await store.move_agents(s, population.id, ids[:500], [workers[1]], workers[0]) == 500
        assert await store.placement_runs(s, population.id) == [
            (lo, workers[0]),
            (lo + 1500, workers[1]),
            (lo + 2000, workers[2]),
        ]
        assert await store.agent_spans(s, population.id) == {
            workers[0]: (0, 1499),
            workers[1]: (1500, 1999),
            workers[2]: (2000, 2999),
        }
        assert (await store.get_agent(s, lo + 1499)).worker_id == workers[0]
        assert (await store.get_agent(s, lo + 1500)).worker_id == workers[1]
        # Worker 2's agents move into the middle: worker 0 then holds two ranges, read in order.
        tail = await store.agent_ids_on(s, population.id, [workers[2]])
        await store.move_agents(s, population.id, tail, [workers[2]], workers[0])
        pages = await _all_pages(s, 400, worker_id=workers[0])
        assert pages == [*range(lo, lo + 1500), *range(lo + 2000, lo + 3000)]
        assert await store.agents_per_worker(s, population.id) == {
            workers[0]: 2500,
            workers[1]: 500,
        }
        # Deleting shrinks the ranges with the rows they hold, chunk by chunk.
        assert await store.delete_population_rows(s, population.id, chunk=300) == 3000
        assert await store.agents_per_worker(s, population.id) == {}
        assert await store.count_agents(s, population.id) == 0


async def test_a_repair_renders_template_personas_as_deploy_stored_them(sessions):
    """Re-placed agents of a template population get their personas from the seeded sample,
    not read back: the same text deploy stored, agent by agent."""
    config = PopulationConfig.model_validate(
        {
            "name": "rendered",
            "size": 600,
            "seed": 11,
            "distributions": [
                {
                    "name": "education",
                    "categories": [
                        {"name": "school", "weight": 0.5},
                        {"name": "degree", "weight": 0.5},
                    ],
                },
                {
                    "name": "region",
                    "categories": [
                        {"name": "north", "weight": 0.3},
                        {"name": "south", "weight": 0.7},
                    ],
                },
            ],
            "persona": {"template": "A {education} graduate from the {region}."},
        }
    )
    sampled = sample(config)
    rows = np.arange(config.size)
    async with sessions() as s:
        (worker,) = await _workers(s, 1)
        population = await store.create_population(
            s, config.name, config.size, config.seed, config.model_dump(mode="json")
        )
        columns = {
            name: np.asarray(sampled.categories[name], dtype=object)[codes]
            for name, codes in sampled.codes.items()
        }
        stored = render_template(config.persona.template, sampled, rows)
        await store.bulk_insert_agents(
            s, population.id, 0, columns, stored, np.full(config.size, worker)
        )
        keeper = PlacementKeeper(sessions, EventHub(), replace_after_s=1, interval_s=1)
        ids = (await store.agent_ids_on(s, population.id, [worker]))[100:400:3]
        rendered = await keeper._personas(s, population, sampled, ids, ids & np.int64(0xFFFFFFFF))
        assert rendered == await store.personas_of(s, ids)
        assert len(set(rendered)) == 4  # every combination of the two attributes appears


def _liveness() -> Liveness:
    return Liveness(
        EventHub(), heartbeat_interval_s=1.0, ttl_s=3.0, max_beats_per_s=100, flush_s=2, sweep_s=0.5
    )


async def test_prompt_groups_are_counted_by_size_per_worker(sessions):
    """What the LLM estimate reads: groups of agents a prompt naming the persona and some
    attributes cannot tell apart, counted by size per worker, with a label's value."""
    async with sessions() as s:
        workers = await _workers(s, 3)
        population = await _deploy(s, 1200, workers)
        sizes = store.prompt_group_sizes
        # Every persona differs: 400 groups of one agent on each worker.
        assert sorted(await sizes(s, population.id, True, [])) == [
            (w, None, 1, 400) for w in workers
        ]
        # Education cycles by 4 and placement by 3: each worker has 100 agents of each.
        assert sorted(await sizes(s, population.id, False, ["education"])) == [
            (w, None, 100, 4) for w in workers
        ]
        labelled = sorted(await sizes(s, population.id, False, [], label="education"))
        assert labelled == sorted((w, e, 100, 1) for w in workers for e in EDUCATION)
        # A number attribute too: age cycles by 50, with education by 100, placement by 300.
        assert sorted(await sizes(s, population.id, False, ["age", "education"])) == [
            (w, None, 4, 100) for w in workers
        ]
        # Nothing named per agent: one group a worker.
        assert sorted(await sizes(s, population.id, False, [])) == [
            (w, None, 400, 1) for w in workers
        ]
