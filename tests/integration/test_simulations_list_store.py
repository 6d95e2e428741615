"""The runs list's query (backend.simulations.listing) on SQLite and on Postgres: every filter,
every sort with ties split across pages, the cursor's refusals, and the last round's metrics."""

from __future__ import annotations

import asyncio
import base64
import json
from datetime import datetime

import pytest
from sqlalchemy import update

from backend.db.migrate import upgrade
from backend.db.models import Simulation, SimulationRound
from backend.db.session import make_engine, make_sessionmaker
from backend.errors import Invalid
from backend.simulations import store
from backend.simulations.listing import SORTS, RunFilters, list_runs
from backend.sweeps import store as sweep_store

SAME_TIME = datetime(2026, 12, 1, 12, 0, 0)
EVERY_RUN = RunFilters()

# name, population, status, plugin, in the sweep, created at SAME_TIME
RUNS = [
    ("Alpha baseline", 1, "completed", "guess", False, True),
    ("beta", 1, "failed", "guess", False, True),
    ("Gamma", 2, "completed", "other", False, True),
    ("rule-by-seed #1", 2, "completed", "guess", True, False),
    ("rule-by-seed #2", 3, "cancelled", "guess", True, False),
    ("beta", 3, "running", "guess", False, True),
    ("100% beta_x", 4, "completed", "guess", False, False),
]


@pytest.fixture
async def listed(database_url):
    """The runs above, as {name-or-index: id}, with a sweep over two of them; run 0 has two
    kept rounds (metrics mean 40 then 30)."""
    await asyncio.to_thread(upgrade, database_url)
    engine = make_engine(database_url)
    sessions = make_sessionmaker(engine)
    async with sessions() as session:
        sweep = await sweep_store.create_sweep(
            session, name="rule-by-seed", mode="sequence", config={}, runs=2
        )
    ids = []
    for i, (name, population, status, plugin, swept, same_time) in enumerate(RUNS):
        async with sessions() as session:
            simulation = await store.create_simulation(
                session,
                population_id=population,
                name=name,
                rounds=2 + i,
                config={"rounds": 2, "plugin": {"name": plugin, "params": {"rule": {"ratio": i}}}},
                seed=i,
                models=[],
                version="test",
                sweep_id=sweep.id if swept else None,
                sweep_params={"seed": i} if swept else None,
            )
            values = {"status": status, "current_round": i % 3}
            if same_time:
                values["created_at"] = SAME_TIME
            await session.execute(
                update(Simulation).where(Simulation.id == simulation.id).values(**values)
            )
            await session.commit()
            ids.append(simulation.id)
    async with sessions() as session:
        for number, mean in ((1, 40.0), (2, 30.0)):
            session.add(_round(ids[0], number, {"mean": mean, "target": mean * 2 / 3}))
        await session.commit()
    yield sessions, ids, sweep.id
    await engine.dispose()


def _round(simulation_id: int, number: int, metrics: dict) -> SimulationRound:
    return SimulationRound(
        simulation_id=simulation_id,
        round=number,
        n_valid=1,
        n_invalid=0,
        n_late=0,
        winner_count=0,
        winner_agents=[],
        histogram=[],
        segments={},
        metrics=metrics,
        prompt_tokens=0,
        completion_tokens=0,
        llm_errors=0,
        endpoints=[],
        duration_s=0.1,
        finished_at=SAME_TIME,
    )


async def _ids(sessions, filters: RunFilters = EVERY_RUN, **kwargs) -> list[int]:
    async with sessions() as session:
        page = await list_runs(session, filters, **kwargs)
    return [r.simulation.id for r in page.runs]


async def _walk(sessions, sort: str, limit: int, filters: RunFilters = EVERY_RUN) -> list[int]:
    """Every page of the list in `sort` order, following next_cursor."""
    seen: list[int] = []
    cursor = None
    async with sessions() as session:
        while True:
            page = await list_runs(session, filters, sort=sort, cursor=cursor, limit=limit)
            seen += [r.simulation.id for r in page.runs]
            assert len(page.runs) <= limit
            if page.next_cursor is None:
                return seen
            assert page.runs, "a cursor after an empty page"
            cursor = page.next_cursor


async def test_each_filter_is_applied(listed):
    sessions, ids, sweep_id = listed
    by = dict(enumerate(ids))
    assert await _ids(sessions) == ids
    # A substring of the name, in any case; % and _ are plain characters.
    assert await _ids(sessions, RunFilters(q="BETA")) == [by[1], by[5], by[6]]
    assert await _ids(sessions, RunFilters(q="%")) == [by[6]]
    assert await _ids(sessions, RunFilters(q="a_x")) == [by[6]]
    assert await _ids(sessions, RunFilters(q="a x")) == []
    assert await _ids(sessions, RunFilters(population_id=1)) == [by[0], by[1]]
    assert await _ids(sessions, RunFilters(statuses=("failed", "cancelled"))) == [by[1], by[4]]
    assert await _ids(sessions, RunFilters(plugin="other")) == [by[2]]
    assert await _ids(sessions, RunFilters(plugin="guess")) == [i for i in ids if i != by[2]]
    assert await _ids(sessions, RunFilters(sweep_id=sweep_id)) == [by[3], by[4]]
    assert await _ids(sessions, RunFilters(sweep_id=sweep_id + 1)) == []
    both = RunFilters(q="beta", statuses=("running", "completed"), plugin="guess")
    assert await _ids(sessions, both) == [by[5], by[6]]


async def test_every_sort_pages_whole_and_in_order(listed):
    """Each sort, walked one, two and three rows a page, gives every run once, in the order
    of (value, id); ties (two runs named beta, five created at the same time) split across
    pages keep that order."""
    sessions, ids, _ = listed
    async with sessions() as session:
        rows = {
            r.simulation.id: r.simulation for r in (await list_runs(session, RunFilters())).runs
        }

    def key(column: str, sid: int):
        value = getattr(rows[sid], column)
        return value.lower() if column == "name" else value

    for sort in SORTS:
        column = sort.removeprefix("-")
        descending = sort.startswith("-")
        expected = sorted(ids, key=lambda sid: (key(column, sid), sid), reverse=descending)
        for limit in (1, 2, 3):
            assert await _walk(sessions, sort, limit) == expected, (sort, limit)
    by = dict(enumerate(ids))
    assert await _walk(sessions, "name", 3) == [by[6], by[0], by[1], by[5], by[2], by[3], by[4]]
    # Filtered and sorted together.
    beta = RunFilters(q="beta")
    assert await _walk(sessions, "-name", 1, beta) == [by[5], by[1], by[6]]


async def test_after_still_pages_by_id(listed):
    sessions, ids, _ = listed
    async with sessions() as session:
        first = await list_runs(session, RunFilters(), limit=4)
        assert first.next_after == ids[3]
        rest = await list_runs(session, RunFilters(), after=first.next_after)
        assert [r.simulation.id for r in rest.runs] == ids[4:]
        assert rest.next_after is None and rest.next_cursor is None
        newest = await list_runs(session, RunFilters(), sort="-id", limit=2)
        assert [r.simulation.id for r in newest.runs] == ids[:-3:-1]
        older = await list_runs(session, RunFilters(), sort="-id", after=newest.next_after)
        assert [r.simulation.id for r in older.runs] == ids[-3::-1]
        # Sorted by anything else, a page says where the next starts only by its cursor.
        by_name = await list_runs(session, RunFilters(), sort="name", limit=2)
        assert by_name.next_after is None and by_name.next_cursor


def _cursor(*parts) -> str:
    """A cursor in the list's encoding, holding whatever a client may have made up."""
    return base64.urlsafe_b64encode(json.dumps(parts).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    ("sort", "cursor", "after", "field"),
    [
        ("name", "not a cursor!", None, "cursor"),
        ("name", _cursor(), None, "cursor"),
        ("created_at", _cursor("created_at", 1, 2), None, "cursor"),
        ("created_at", _cursor("created_at", "2026-12-01T12:00:00+02:00", 2), None, "cursor"),
        ("current_round", _cursor("current_round", 2**40, 2), None, "cursor"),
        ("name", _cursor("name", "a\x00b", 2), None, "cursor"),
        ("name", _cursor("name", "a", -1), None, "cursor"),
        ("name", _cursor({"sort": "name"}, "a", 1), None, "cursor"),
        ("name", None, 3, "after"),
    ],
)
async def test_a_bad_cursor_or_after_is_refused_naming_it(listed, sort, cursor, after, field):
    sessions, _, _ = listed
    async with sessions() as session:
        with pytest.raises(Invalid) as refused:
            await list_runs(session, RunFilters(), sort=sort, cursor=cursor, after=after)
    assert refused.value.loc == ("query", field)


async def test_a_cursor_of_another_sort_is_refused(listed):
    sessions, _, _ = listed
    async with sessions() as session:
        page = await list_runs(session, RunFilters(), sort="name", limit=1)
        with pytest.raises(Invalid, match="pages sort=name, not sort=-name") as refused:
            await list_runs(session, RunFilters(), sort="-name", cursor=page.next_cursor)
    assert refused.value.loc == ("query", "cursor")


async def test_each_run_carries_its_sweep_name_and_last_metrics(listed):
    sessions, ids, _ = listed
    async with sessions() as session:
        runs = {r.simulation.id: r for r in (await list_runs(session, RunFilters())).runs}
    assert runs[ids[0]].last_metrics == {"mean": 30.0, "target": 20.0}
    assert runs[ids[1]].last_metrics == {}
    assert runs[ids[3]].sweep_name == runs[ids[4]].sweep_name == "rule-by-seed"
    assert runs[ids[0]].sweep_name is None
