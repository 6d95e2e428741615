"""Fixtures: databases (SQLite and a fresh Postgres database per run) and real processes."""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest

from tests.support import IN_CI, Manager, reset_postgres, stop_process

PG_ADMIN_URL = os.environ.get(
    "POPULACE_TEST_PG_ADMIN_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres"
)


def _unavailable(reason: str):
    # Under CI a missing service is a failure, never a silent skip.
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: required)")
    pytest.skip(reason)


async def _pg_admin(sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(
        PG_ADMIN_URL.replace("postgresql+asyncpg", "postgresql"), timeout=5
    )
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def postgres_server_url():
    """A fresh database on the test Postgres server, dropped at the end of the run."""
    name = f"populace_test_{uuid.uuid4().hex[:10]}"
    try:
        asyncio.run(_pg_admin(f'CREATE DATABASE "{name}"'))
    except Exception as exc:
        _unavailable(f"PostgreSQL at {PG_ADMIN_URL} is not reachable: {exc}")
    base = PG_ADMIN_URL.rsplit("/", 1)[0]
    yield f"{base}/{name}"
    asyncio.run(_pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture
def postgres_url(postgres_server_url):
    """The run's Postgres database, emptied before each test that uses it."""
    reset_postgres(postgres_server_url)
    return postgres_server_url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request, tmp_path):
    """Each store test runs on SQLite and on Postgres."""
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path}/populace.db"
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def manager_factory(tmp_path):
    """Start real managers; every one (and every worker started through it) is stopped at the end."""
    started: list[Manager] = []
    children = []

    def make(database_url: str | None = None, **kwargs) -> Manager:
        url = database_url or f"sqlite+aiosqlite:///{tmp_path}/populace.db"
        manager = Manager(tmp=tmp_path, database_url=url, **kwargs)
        original = manager.start_workers

        def start_workers(*args, **kw):
            proc = original(*args, **kw)
            children.append(proc)
            return proc

        manager.start_workers = start_workers  # type: ignore[method-assign]
        started.append(manager)
        return manager

    yield make
    for proc in children:
        stop_process(proc)
    for manager in started:
        manager.stop()


@pytest.fixture
def manager(manager_factory):
    return manager_factory().start()


@pytest.fixture(scope="module")
def shared_manager(tmp_path_factory):
    """One manager for a whole module of tests that only read from it or add throwaway rows."""
    tmp = tmp_path_factory.mktemp("manager")
    manager = Manager(tmp=tmp, database_url=f"sqlite+aiosqlite:///{tmp}/populace.db").start()
    yield manager
    manager.stop()


def pytest_collection_modifyitems(config, items):
    """Run browser tests last: Playwright's sync API keeps an event loop running in the main
    thread for the rest of the session, and asyncio tests after it could not start theirs."""
    items.sort(key=lambda item: "/tests/ui/" in str(item.path).replace("\\", "/"))
