"""SQL on sweeps, and the reads of their runs (simulations with sweep_id set).

Every function takes an AsyncSession and commits its own writes, like the other stores. A
sweep has at most MAX_RUNS runs, so its runs are read whole.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import Simulation, SimulationRound, Sweep
from backend.db.times import utcnow
from backend.errors import NotFound

FINAL_STATUSES = ("completed", "failed", "cancelled")


class UnknownSweep(NotFound):
    what = "sweep"


async def create_sweep(
    session: AsyncSession, *, name: str, mode: str, config: dict[str, Any], runs: int
) -> Sweep:
    sweep = Sweep(
        name=name, status="running", mode=mode, config=config, runs=runs, created_at=utcnow()
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
    return list(await session.scalars(select(Sweep).where(Sweep.status == "running")))


async def finish(
    session: AsyncSession, sweep_id: int, status: str, *, error: str | None = None
) -> Sweep | None:
    """running -> a final status; None when the sweep was no longer running."""
    stmt = (
        update(Sweep)
        .where(Sweep.id == sweep_id, Sweep.status == "running")
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


async def runs_of(session: AsyncSession, sweep_id: int) -> list[Simulation]:
    """The sweep's simulations, oldest first."""
    return list(
        await session.scalars(
            select(Simulation).where(Simulation.sweep_id == sweep_id).order_by(Simulation.id)
        )
    )


async def last_rounds(
    session: AsyncSession, simulation_ids: list[int]
) -> dict[int, SimulationRound]:
    """Each simulation's last kept round, by simulation id (none for a run without rounds)."""
    if not simulation_ids:
        return {}
    last = (
        select(SimulationRound.simulation_id, func.max(SimulationRound.round).label("round"))
        .where(SimulationRound.simulation_id.in_(simulation_ids))
        .group_by(SimulationRound.simulation_id)
        .subquery()
    )
    rows = await session.scalars(
        select(SimulationRound).join(
            last,
            and_(
                SimulationRound.simulation_id == last.c.simulation_id,
                SimulationRound.round == last.c.round,
            ),
        )
    )
    return {r.simulation_id: r for r in rows}
