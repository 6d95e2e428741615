"""SQL on sweeps (their runs, simulations with sweep_id set, are read through the simulation
store: sweep_runs, last_rounds).

Every function takes an AsyncSession and commits its own writes, like the other stores. A
sweep has at most MAX_RUNS runs, so its runs are read whole.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import Sweep
from backend.db.times import utcnow
from backend.errors import NotFound
from backend.lifecycles import sweep as lifecycle


class UnknownSweep(NotFound):
    what = "sweep"


async def create_sweep(
    session: AsyncSession, *, name: str, mode: str, config: dict[str, Any], runs: int
) -> Sweep:
    sweep = Sweep(
        name=name,
        status=lifecycle.RUNNING,
        mode=mode,
        config=config,
        runs=runs,
        created_at=utcnow(),
    )
    session.add(sweep)
    await session.commit()
    return sweep


async def get_sweep(session: AsyncSession, sweep_id: int) -> Sweep:
    sweep = await session.get(Sweep, sweep_id, populate_existing=True)
    if sweep is None:
        raise UnknownSweep(sweep_id)
    return sweep


async def list_sweeps(
    session: AsyncSession, *, after: int | None = None, limit: int = 100
) -> tuple[list[Sweep], int | None]:
    stmt = select(Sweep).order_by(Sweep.id).limit(limit + 1)
    if after is not None:
        stmt = stmt.where(Sweep.id > after)
    rows = list(await session.scalars(stmt))
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (rows[-1].id if more else None)


async def running_sweeps(session: AsyncSession) -> list[Sweep]:
    return list(await session.scalars(select(Sweep).where(Sweep.status == lifecycle.RUNNING)))


async def finish(
    session: AsyncSession, sweep_id: int, status: str, *, error: str | None = None
) -> Sweep | None:
    """running -> a final status; None when the sweep was no longer running."""
    stmt = (
        update(Sweep)
        .where(Sweep.id == sweep_id, Sweep.status.in_(lifecycle.MACHINE.sources(status)))
        .values(status=status, error=error, finished_at=utcnow())
        .returning(Sweep)
        .execution_options(synchronize_session=False, populate_existing=True)
    )
    sweep = (await session.execute(stmt)).scalar_one_or_none()
    await session.commit()
    return sweep


async def delete_sweep_row(session: AsyncSession, sweep_id: int) -> None:
    await session.execute(delete(Sweep).where(Sweep.id == sweep_id))
    await session.commit()
