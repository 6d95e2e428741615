"""Fixtures: databases (SQLite and a fresh Postgres database per run) and real processes."""

from __future__ import annotations

import asyncio
import os
import uuid
from contextlib import contextmanager

import pytest

from tests.support import IN_CI, Manager, ManagerFactory, reset_postgres, stop_process

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


@contextmanager
def _fresh_postgres_database():
    """A new database on the test Postgres server, dropped on exit."""
    name = f"populace_test_{uuid.uuid4().hex[:10]}"
    try:
        asyncio.run(_pg_admin(f'CREATE DATABASE "{name}"'))
    except Exception as exc:
        _unavailable(f"PostgreSQL at {PG_ADMIN_URL} is not reachable: {exc}")
    base = PG_ADMIN_URL.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        asyncio.run(_pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="session")
def postgres_server_url():
    """A fresh database on the test Postgres server, dropped at the end of the run."""
    with _fresh_postgres_database() as url:
        yield url


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


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def module_database_url(request, tmp_path_factory):
    """database_url for a cluster a module's tests share: SQLite, then module_postgres_url."""
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('db')}/populace.db"
    return request.getfixturevalue("module_postgres_url")


@pytest.fixture(scope="module")
def module_postgres_url():
    """A Postgres database of the module's own, for a cluster its tests share (postgres_url
    empties the run's database under other tests' feet)."""
    with _fresh_postgres_database() as url:
        yield url


@pytest.fixture
def manager_factory(tmp_path):
    """Start real managers; every one (and every worker started through it) is stopped at the end."""
    factory = ManagerFactory(tmp_path)
    yield factory
    factory.stop()


@pytest.fixture(scope="module")
def module_manager_factory(tmp_path_factory):
    """manager_factory for a whole module: a manager (and its workers) that its tests share,
    started once instead of once per test (a start costs seconds)."""
    factory = ManagerFactory(tmp_path_factory.mktemp("managers"))
    yield factory
    factory.stop()


@pytest.fixture
def manager(manager_factory):
    return manager_factory().start()


@pytest.fixture(scope="module")
def _module_manager(module_manager_factory):
    return module_manager_factory().start()


@pytest.fixture
def module_manager(_module_manager, module_manager_factory):
    """The module's manager, started once, without workers: the worker nodes a test starts
    through it are stopped (and so deregistered) when the test ends, so each test sees only
    its own workers, as on a fresh manager."""
    started_before = len(module_manager_factory.children)
    yield _module_manager
    for node in module_manager_factory.children[started_before:]:
        stop_process(node)


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
