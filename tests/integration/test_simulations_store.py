"""The simulation store and its migration, on SQLite and on Postgres."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import numpy as np
import pytest
from sqlalchemy import MetaData, Table, insert, inspect, select

from backend.db.migrate import current, downgrade, upgrade
from backend.db.models import Decision, GroupMetric, SimulationRound
from backend.db.session import make_engine, make_sessionmaker
from backend.db.times import utcnow
from backend.simulations import group_store, store
from backend.simulations.config import SimulationConfig
from backend.simulations.metrics_declared import guess_metrics
from backend.simulations.outcome import (
    INVALID,
    LATE,
    LOST,
    VALID,
    DecisionTable,
    RoundOutcome,
)


def _tables(url: str) -> set[str]:
    async def read():
        engine = make_engine(url)
        async with engine.connect() as conn:
            names = await conn.run_sync(lambda c: set(inspect(c).get_table_names()))
        await engine.dispose()
        return names

    return asyncio.run(read())


def test_migration_0003_up_down_up(database_url):
    upgrade(database_url, "0003_simulations")
    assert current(database_url) == "0003_simulations"
    assert {"simulations", "rounds", "decisions", "populations"} <= _tables(database_url)
    downgrade(database_url, "0002_populations")
    tables = _tables(database_url)
    assert not {"simulations", "rounds", "decisions"} & tables and "agents" in tables
    upgrade(database_url, "0003_simulations")
    assert current(database_url) == "0003_simulations"


@pytest.fixture
async def sessions(database_url):
    await asyncio.to_thread(upgrade, database_url)
    engine = make_engine(database_url)
    yield make_sessionmaker(engine)
    await engine.dispose()


async def _simulation(sessions, population_id: int = 1):
    async with sessions() as session:
        return await store.create_simulation(
            session,
            population_id=population_id,
            name="t",
            rounds=3,
            config={"rounds": 3},
            seed=5,
            models=[],
            version="test",
        )


def _round(number: int, n: int, status=None, responses=None) -> tuple[RoundOutcome, DecisionTable]:
    ids = np.arange(n, dtype=np.int64) + (1 << 32)
    values = np.linspace(0, 100, n)
    status = np.zeros(n, np.uint8) if status is None else np.asarray(status, np.uint8)
    values[status != VALID] = np.nan
    table = DecisionTable(ids, values, status, responses)
    result = RoundOutcome(
        round=number,
        n_valid=int((status == VALID).sum()),
        n_invalid=int((status == INVALID).sum()),
        n_late=int((status == LATE).sum()),
        n_lost=int((status == LOST).sum()),
        mean=50.0,
        median=50.0,
        std=1.0,
        min=0.0,
        max=100.0,
        target=33.3,
        winner_value=33.0,
        winner_count=1,
        winner_agents=[int(ids[0])],
        histogram=[n],
        segments={"education": {"doctorate": {"count": n, "mean": 50.0, "std": 1.0}}},
        prompt_tokens=10,
        cached_prompt_tokens=4,
        completion_tokens=2,
        llm_errors=0,
        llm_requests=3,
        network_bytes=0,
        duration_s=0.5,
    )
    return _with_metrics(result), table


def _with_metrics(result: RoundOutcome) -> RoundOutcome:
    """The guessing game's metrics as its resolve gives them: the values of the same names."""
    return replace(result, metrics={m.name: getattr(result, m.name) for m in guess_metrics()})


async def test_one_active_simulation_per_population(sessions):
    first = await _simulation(sessions, population_id=1)
    with pytest.raises(store.PopulationBusy):
        await _simulation(sessions, population_id=1)
    await _simulation(sessions, population_id=2)  # another population is not held
    async with sessions() as session:
        assert (await store.active_simulation(session, 1)).id == first.id
        await store.set_status(session, first.id, "running")
        await store.set_status(session, first.id, "completed")
        # A final status is never left.
        assert await store.set_status(session, first.id, "running") is None
        assert (await store.get_simulation(session, first.id)).status == "completed"
    await _simulation(sessions, population_id=1)


async def test_a_round_lands_whole_or_not_at_all(sessions):
    simulation = await _simulation(sessions)
    result, table = _round(1, 25_000, responses=[f"answer {i}" for i in range(25_000)])
    async with sessions() as session:
        await store.save_round(session, simulation.id, result, table)
    # Round 2 breaks on its last decision (an agent twice): nothing of round 2 may remain.
    result2, table2 = _round(2, 25_000)
    table2.agent_ids[-1] = table2.agent_ids[-2]
    async with sessions() as session:
        with pytest.raises(Exception):  # noqa: B017 - the driver's integrity error
            await store.save_round(session, simulation.id, result2, table2)
    async with sessions() as session:
        rounds = list(await session.scalars(select(SimulationRound.round)))
        assert rounds == [1]
        assert await store.count_decisions(session, simulation.id) == 25_000
        row = await store.get_simulation(session, simulation.id)
        assert (row.current_round, row.prompt_tokens, row.completion_tokens) == (1, 10, 2)
        assert row.cached_prompt_tokens == 4
        stored = (await session.execute(select(SimulationRound))).scalar_one()
        assert stored.cached_prompt_tokens == 4
        assert stored.segments["education"]["doctorate"]["count"] == 25_000
        first = await session.get(Decision, (simulation.id, 1, 1 << 32))
        assert (first.value, first.status, first.response) == (0.0, "valid", "answer 0")


async def test_saving_a_kept_round_again_changes_nothing(sessions):
    """A retry after a commit whose answer was lost: decisions stay unique per (simulation,
    round, agent), and the run's totals are not counted twice."""
    simulation = await _simulation(sessions)
    result, table = _round(1, 1000, status=[VALID, LOST] * 500)
    for _ in range(2):
        async with sessions() as session:
            await store.save_round(session, simulation.id, result, table)
    async with sessions() as session:
        assert await store.count_decisions(session, simulation.id) == 1000
        row = await store.get_simulation(session, simulation.id)
        assert (row.current_round, row.prompt_tokens, row.lost_agents) == (1, 10, 500)
        assert row.cached_prompt_tokens == 4
        kept = (await session.execute(select(SimulationRound))).scalar_one()
        assert kept.n_lost == 500


async def test_decision_pages_come_in_export_order_with_bounded_pages(sessions):
    simulation = await _simulation(sessions)
    status = [VALID, INVALID, LATE, LOST] * 300
    for number in (1, 2, 3):
        result, table = _round(number, 1200, status=status)
        async with sessions() as session:
            await store.save_round(session, simulation.id, result, table)
    pages = [page async for page in store.iter_decision_pages(sessions, simulation.id, page=500)]
    assert [len(p) for p in pages] == [500, 500, 200] * 3  # round by round
    rows = [row for page in pages for row in page]
    keys = [(r[0], r[1]) for r in rows]
    assert keys == sorted(keys) and len(set(keys)) == 3600
    assert [r[3] for r in rows[:4]] == ["valid", "invalid", "late", "lost"]
    assert rows[1][2] is None and rows[2][2] is None and rows[3][2] is None and rows[0][2] == 0.0
    only_two = [
        r
        async for page in store.iter_decision_pages(sessions, simulation.id, 2, page=700)
        for r in page
    ]
    assert len(only_two) == 1200 and {r[0] for r in only_two} == {2}


async def test_decisions_are_stored_bit_for_bit(sessions):
    """Values (any float) and every status come back exactly as the round had them, through
    the binary COPY encoder (backend.simulations.pgcopy) on Postgres and executemany on
    SQLite."""
    simulation = await _simulation(sessions)
    rng = np.random.default_rng(3)
    status = rng.choice([VALID, VALID, VALID, INVALID, LATE, LOST], size=5000)
    result, table = _round(1, 5000, status=status)
    table.values[status == VALID] = rng.normal(0, 1e6, size=int((status == VALID).sum()))
    async with sessions() as session:
        await store.save_round(session, simulation.id, result, table)
    rows = [r async for page in store.iter_decision_pages(sessions, simulation.id) for r in page]
    assert [r[1] for r in rows] == table.agent_ids.tolist()
    stored = np.array([np.nan if r[2] is None else r[2] for r in rows])
    assert np.array_equal(stored, table.values, equal_nan=True)
    names = {VALID: "valid", INVALID: "invalid", LATE: "late", LOST: "lost"}
    assert [r[3] for r in rows] == [names[s] for s in status.tolist()]
    assert all(r[4] is None for r in rows)


async def test_deleting_a_finished_simulation_takes_its_rounds_and_decisions_only(
    sessions, database_url
):
    gone, kept = await _simulation(sessions, population_id=1), await _simulation(sessions, 2)
    async with sessions() as session:
        for simulation in (gone, kept):
            for number in (1, 2):
                result, table = _round(number, 3_000)
                # Group metrics ride with the round: 10^5 groups, kept compressed.
                flags = np.where(np.arange(100_000) % 3 == 0, float(number), np.nan)
                result = replace(result, group_metrics={"at": flags, "n": np.full(100_000, 2.0)})
                await store.save_round(session, simulation.id, result, table)
        back = await group_store.load(session, gone.id, 2)
        assert np.array_equal(back["at"], flags, equal_nan=True) and len(back["n"]) == 100_000
        assert await group_store.load(session, gone.id, 3) == {}
        assert await group_store.series(session, gone.id, 3, 0, 10) == [
            (1, {"at": 1.0, "n": 2.0}),
            (2, {"at": 2.0, "n": 2.0}),
        ]
        with pytest.raises(store.SimulationActive, match="is pending"):
            await store.delete_simulation(session, gone.id)
        assert await store.count_decisions(session, gone.id) == 6_000  # nothing changed
        await store.set_status(session, gone.id, "running")
        await store.set_status(session, gone.id, "completed")
        await store.delete_simulation(session, gone.id)
        with pytest.raises(store.UnknownSimulation):
            await store.get_simulation(session, gone.id)
        with pytest.raises(store.UnknownSimulation):
            await store.delete_simulation(session, gone.id)
        assert await store.count_decisions(session, gone.id) == 0
        assert await store.count_decisions(session, kept.id) == 6_000
        rounds = (await session.execute(select(SimulationRound.simulation_id))).scalars().all()
        assert set(rounds) == {kept.id}
        grouped = (await session.execute(select(GroupMetric.simulation_id))).scalars().all()
        assert set(grouped) == {kept.id} and len(grouped) == 4
    if database_url.startswith("postgresql"):
        tables = await asyncio.to_thread(_tables, database_url)
        assert store.decisions_partition(kept.id) in tables
        assert store.decisions_partition(gone.id) not in tables


def test_migration_0008_keeps_every_decision_both_ways(database_url):
    """Partitioned by simulation on PostgreSQL (one table on SQLite): decisions stored under
    0008 survive a downgrade to one table and the upgrade back into partitions."""
    upgrade(database_url)

    async def fill() -> int:
        engine = make_engine(database_url)
        sessions = make_sessionmaker(engine)
        simulation = await _simulation(sessions)
        async with sessions() as session:
            result, table = _round(1, 2_000)
            await store.save_round(session, simulation.id, result, table)
        await engine.dispose()
        return simulation.id

    async def count(simulation_id: int) -> int:
        engine = make_engine(database_url)
        async with make_sessionmaker(engine)() as session:
            n = await store.count_decisions(session, simulation_id)
        await engine.dispose()
        return n

    simulation_id = asyncio.run(fill())
    downgrade(database_url, "0007_cached_prompt_tokens")
    assert asyncio.run(count(simulation_id)) == 2_000
    if database_url.startswith("postgresql"):
        assert store.decisions_partition(simulation_id) not in _tables(database_url)
    upgrade(database_url, "0008_decisions_by_simulation")
    assert current(database_url) == "0008_decisions_by_simulation"
    assert asyncio.run(count(simulation_id)) == 2_000
    if database_url.startswith("postgresql"):
        assert store.decisions_partition(simulation_id) in _tables(database_url)


def _columns_as_metrics(row: SimulationRound) -> dict:
    return {m.name: getattr(row, m.name) for m in guess_metrics()}


def test_a_round_keeps_its_metrics_and_migration_0013_gives_older_rounds_theirs(database_url):
    """A round is committed with `metrics` equal to its columns; rounds kept before 0013 (the
    column dropped by a downgrade) get the same from their columns, exactly, nulls included."""
    upgrade(database_url)
    # 0.1 + 0.2 needs 17 digits: a 15-digit JSON float would come back as 0.3.
    played, played_table = _round(1, 10)
    played = _with_metrics(replace(played, mean=0.1 + 0.2, target=1 / 3, std=1e-300))
    all_invalid = [INVALID] * 10
    empty, empty_table = _round(2, 10, status=all_invalid)
    empty = replace(
        empty, **dict.fromkeys(("mean", "median", "std", "min", "max", "target")), winner_value=None
    )
    empty = _with_metrics(replace(empty, winner_count=0, winner_agents=[]))

    async def keep() -> int:
        engine = make_engine(database_url)
        sessions = make_sessionmaker(engine)
        simulation = await _simulation(sessions)
        for result, table in ((played, played_table), (empty, empty_table)):
            async with sessions() as session:
                await store.save_round(session, simulation.id, result, table)
        await engine.dispose()
        return simulation.id

    async def rounds(simulation_id: int) -> list[SimulationRound]:
        engine = make_engine(database_url)
        async with make_sessionmaker(engine)() as session:
            rows = await store.all_rounds(session, simulation_id)
        await engine.dispose()
        return rows

    simulation_id = asyncio.run(keep())
    committed = asyncio.run(rounds(simulation_id))
    assert [r.metrics for r in committed] == [_columns_as_metrics(r) for r in committed]

    downgrade(database_url, "0012")
    upgrade(database_url)
    backfilled = asyncio.run(rounds(simulation_id))
    assert [r.metrics for r in backfilled] == [r.metrics for r in committed]
    first, second = backfilled
    assert first.metrics["mean"] == 0.1 + 0.2 and first.metrics["target"] == 1 / 3
    assert first.metrics["std"] == 1e-300 and first.metrics["winner_count"] == 1
    assert second.metrics == {
        **dict.fromkeys(("mean", "median", "std", "min", "max", "target", "winner_value")),
        "winner_count": 0,
        "n_valid": 0,
        "n_invalid": 10,
    }
    assert all(type(r.metrics["n_invalid"]) is int for r in backfilled)


LEGACY_CONFIG = {
    "population_id": 1,
    "rounds": 3,
    "rule": {"preset": "1/2+5", "ratio": None, "offset": None, "min": 0.0, "max": 100.0},
    "feedback": {"mean": True},
    "policy": {"kind": "synthetic", "latency_s": 0.0},
}


def test_migration_0015_makes_stored_configs_name_their_plugin_and_back(database_url):
    """Configs stored before plugins give the game's rule and feedback at the top level; 0015
    moves them into plugin.params, and the config reads the same; a downgrade moves them back."""
    upgrade(database_url, "0014_worker_plugins")

    # The table as each revision has it (reflected): the models describe the newest schema.
    async def simulations(conn) -> Table:
        return await conn.run_sync(lambda c: Table("simulations", MetaData(), autoload_with=c))

    async def keep(config: dict, population_id: int) -> int:
        engine = make_engine(database_url)
        async with engine.begin() as conn:
            table = await simulations(conn)
            row = {
                "population_id": population_id,
                "name": "t",
                "status": "pending",
                "rounds": 3,
                "current_round": 0,
                "config": config,
                "seed": 5,
                "models": [],
                "version": "test",
                "prompt_tokens": 0,
                "cached_prompt_tokens": 0,
                "completion_tokens": 0,
                "created_at": utcnow(),
            }
            inserted = await conn.execute(
                insert(table).values({k: v for k, v in row.items() if k in table.c})
            )
            simulation_id = inserted.inserted_primary_key[0]
        await engine.dispose()
        return simulation_id

    async def config_of(simulation_id: int) -> dict:
        engine = make_engine(database_url)
        async with engine.connect() as conn:
            table = await simulations(conn)
            config = await conn.scalar(select(table.c.config).where(table.c.id == simulation_id))
        await engine.dispose()
        return config if isinstance(config, dict) else json.loads(config)

    old = asyncio.run(keep(LEGACY_CONFIG, 1))
    untouched = asyncio.run(keep({"rounds": 3}, 2))  # nothing to move
    upgrade(database_url)
    moved = asyncio.run(config_of(old))
    assert "rule" not in moved and "feedback" not in moved
    assert moved["plugin"] == {
        "name": "guess",
        "params": {"rule": LEGACY_CONFIG["rule"], "feedback": {"mean": True}},
    }
    # Read as the manager reads it, it is the same game, stored the same way from now on.
    parsed = SimulationConfig.model_validate(moved)
    assert parsed.rule.resolved == (0.5, 5.0) and parsed.feedback.mean
    assert SimulationConfig.model_validate(LEGACY_CONFIG).stored() == parsed.stored()
    assert asyncio.run(config_of(untouched)) == {"rounds": 3}

    downgrade(database_url, "0014_worker_plugins")
    assert asyncio.run(config_of(old)) == LEGACY_CONFIG
