"""A round is stored while the next one plays (backend.simulations.environment): a real manager on
Postgres with two worker processes. The test holds a lock on the `rounds` table (which a round's
commit writes first) from its own connection, so round 1's commit waits on Postgres: round 2
plays meanwhile, round 3 waits for round 1 to be stored, nothing is reported before it is
stored, and the run exports the same bytes as an undisturbed one. A commit that Postgres
refuses fails the run and keeps nothing."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from tests.support import reset_postgres, running_cluster, wait_for
from tests.support_simulations import (
    EventLog,
    deploy,
    export,
    finish,
    level_k,
    rounds_of,
    start,
)

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def pg_cluster(tmp_path_factory, postgres_server_url):
    tmp = tmp_path_factory.mktemp("round-commits")
    reset_postgres(postgres_server_url)
    with running_cluster(tmp, postgres_server_url) as manager:
        yield manager


class TableLock:
    """A transaction of the test's own holding `LOCK TABLE ... IN SHARE MODE`: reads go on,
    writes (the manager's commit of a round) wait until it ends."""

    def __init__(self, url: str, table: str) -> None:
        self.url = url.replace("postgresql+asyncpg", "postgresql")
        self.table = table
        self.loop = asyncio.new_event_loop()
        self.conn = None

    def __enter__(self) -> TableLock:
        async def lock():
            self.conn = await asyncpg.connect(self.url)
            await self.conn.execute(f"BEGIN; LOCK TABLE {self.table} IN SHARE MODE")

        self.loop.run_until_complete(lock())
        return self

    def release(self) -> None:
        if self.conn is not None:
            self.loop.run_until_complete(self.conn.execute("ROLLBACK"))
            self.loop.run_until_complete(self.conn.close())
            self.conn = None

    def __exit__(self, *exc) -> None:
        self.release()
        self.loop.close()


def _sql(url: str, statement: str) -> None:
    async def run():
        conn = await asyncpg.connect(url.replace("postgresql+asyncpg", "postgresql"))
        try:
            await conn.execute(statement)
        finally:
            await conn.close()

    asyncio.run(run())


def _next_topic(api) -> tuple[int, str]:
    # Simulation ids are sequential: subscribe to the next one before creating it.
    items = api.get("/api/simulations", params={"limit": 1000}).json()["items"]
    upcoming = max((s["id"] for s in items), default=0) + 1
    return upcoming, f"simulation:{upcoming}"


def _index(events: list[dict], kind: str, round_number: int) -> int:
    return next(
        i
        for i, e in enumerate(events)
        if e["type"] == kind and e["payload"].get("round") == round_number
    )


def test_a_round_is_stored_while_the_next_one_plays(pg_cluster):
    pid = deploy(pg_cluster, name="pipelined")
    config = level_k(pid, rounds=4, seed=99)
    with pg_cluster.api() as api:
        sid, topic = _next_topic(api)
        events = EventLog(pg_cluster, topic)
        try:
            with TableLock(pg_cluster.database_url, "rounds") as lock:
                assert start(api, config)["id"] == sid
                # Round 2 starts while round 1's commit waits on the lock.
                wait_for(
                    lambda: any(
                        e["payload"].get("round") == 2 for e in events.of("round.progress")
                    ),
                    60,
                    what="round 2 to start",
                )
                # Nothing of round 1 is reported or readable before it is stored.
                assert events.of("round.completed") == []
                assert rounds_of(api, sid) == []
                assert api.get(f"/api/simulations/{sid}").json()["current_round"] == 0
                lock.release()
                done = finish(api, sid)
            wait_for(
                lambda: len(events.of("round.completed")) == 4, 10, what="four rounds reported"
            )
        finally:
            events.close()
        assert done["status"] == "completed", done.get("error")
        assert [r["round"] for r in rounds_of(api, sid)] == [1, 2, 3, 4]
        seen = list(events.events)
        assert [e["payload"]["round"] for e in seen if e["type"] == "round.completed"] == [
            1,
            2,
            3,
            4,
        ]
        # Round 2 played before round 1 was stored; round 3 only after (one commit at a time).
        assert _index(seen, "round.progress", 2) < _index(seen, "round.completed", 1)
        assert _index(seen, "round.completed", 1) < _index(seen, "round.progress", 3)

        undisturbed = start(api, config)["id"]
        assert finish(api, undisturbed)["status"] == "completed"
        assert export(api, sid, "csv") == export(api, undisturbed, "csv")


def test_a_round_the_store_refuses_fails_the_run_and_keeps_nothing_of_it(pg_cluster):
    pid = deploy(pg_cluster, name="refused")
    url = pg_cluster.database_url
    # Every round has valid answers: Postgres refuses each round's row.
    _sql(url, "ALTER TABLE rounds ADD CONSTRAINT no_values CHECK (n_valid < 0) NOT VALID")
    try:
        with pg_cluster.api() as api:
            sid = start(api, level_k(pid, rounds=4))["id"]
            done = finish(api, sid)
            assert done["status"] == "failed" and "no_values" in done["error"], done
            assert rounds_of(api, sid) == [] and done["current_round"] == 0
            assert export(api, sid, "csv").decode().count("\n") == 1  # the header only
    finally:
        _sql(url, "ALTER TABLE rounds DROP CONSTRAINT no_values")
