"""Run Alembic migrations programmatically (the manager upgrades the schema at start)."""

from __future__ import annotations

from pathlib import Path

from alembic.config import Config

from alembic import command

ALEMBIC_DIR = Path(__file__).resolve().parent.parent.parent / "alembic"


def alembic_config(database_url: str) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(ALEMBIC_DIR))
    # env.py reads this rather than alembic.ini, so one settings class decides the URL.
    cfg.attributes["database_url"] = database_url
    return cfg


def upgrade(database_url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(database_url), revision)


def downgrade(database_url: str, revision: str = "base") -> None:
    command.downgrade(alembic_config(database_url), revision)


def current(database_url: str) -> str | None:
    """The schema revision the database is at, or None when it has none."""
    import asyncio

    from alembic.runtime.migration import MigrationContext
    from sqlalchemy.ext.asyncio import create_async_engine

    async def _read() -> str | None:
        engine = create_async_engine(database_url)
        try:
            async with engine.connect() as conn:
                return await conn.run_sync(
                    lambda sync_conn: MigrationContext.configure(sync_conn).get_current_revision()
                )
        finally:
            await engine.dispose()

    return asyncio.run(_read())
