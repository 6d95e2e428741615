"""A run's group metrics (populace.plugin.Resolution.group_metrics) in the store: one row per
(simulation, round, metric) holding a value per group as zlib-compressed little-endian float64,
written in the round's transaction (store.save_round) and read back by round (the API's page of
groups, a resumed run's last round) or by group (one group's figures over the rounds)."""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterator, Mapping

import numpy as np
from sqlalchemy import delete, func, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import GroupMetric
from backend.errors import NotFound


class NoGroupRound(NotFound):
    what = "group metrics of round"


class UnknownGroup(NotFound):
    what = "group"


# Large arrays are packed off the event loop (10^6 groups: tens of milliseconds).
THREAD_ABOVE = 50_000
ROUNDS_PER_READ = 64


def pack(values: np.ndarray) -> bytes:
    return zlib.compress(np.asarray(values, dtype="<f8").tobytes(), 1)


def unpack(data: bytes, groups: int) -> np.ndarray:
    values = np.frombuffer(zlib.decompress(data), dtype="<f8")
    if len(values) != groups:
        raise ValueError(f"a group metric row holds {len(values)} values, not {groups}")
    return values


async def _packed(values: np.ndarray) -> bytes:
    if len(values) > THREAD_ABOVE:
        return await asyncio.to_thread(pack, values)
    return pack(values)


async def save(
    session: AsyncSession, simulation_id: int, round_number: int, metrics: Mapping[str, np.ndarray]
) -> None:
    """Add a round's group metrics to the session's transaction (the caller commits)."""
    rows = [
        {
            "simulation_id": simulation_id,
            "round": round_number,
            "name": name,
            "groups": len(values),
            "data": await _packed(values),
        }
        for name, values in sorted(metrics.items())
    ]
    if rows:
        await session.execute(insert(GroupMetric), rows)


async def load(
    session: AsyncSession, simulation_id: int, round_number: int
) -> dict[str, np.ndarray]:
    """A round's group metrics, {name: values}; {} before round 1 or when it kept none."""
    if round_number < 1:
        return {}
    rows = await session.execute(
        select(GroupMetric.name, GroupMetric.groups, GroupMetric.data).where(
            GroupMetric.simulation_id == simulation_id, GroupMetric.round == round_number
        )
    )
    out = {}
    for name, groups, data in rows:
        out[name] = (
            await asyncio.to_thread(unpack, data, groups)
            if groups > THREAD_ABOVE
            else unpack(data, groups)
        )
    return out


async def rounds_kept(
    session: AsyncSession, simulation_id: int, only_round: int | None = None
) -> list[int]:
    """The rounds that kept group metrics, in order (only `only_round`, when given)."""
    query = select(GroupMetric.round).where(GroupMetric.simulation_id == simulation_id)
    if only_round is not None:
        query = query.where(GroupMetric.round == only_round)
    rows = await session.scalars(query.distinct().order_by(GroupMetric.round))
    return list(rows)


async def names(session: AsyncSession, simulation_id: int) -> list[str]:
    """The group metrics a run kept, by name."""
    rows = await session.scalars(
        select(GroupMetric.name)
        .where(GroupMetric.simulation_id == simulation_id)
        .distinct()
        .order_by(GroupMetric.name)
    )
    return list(rows)


async def last_round(session: AsyncSession, simulation_id: int) -> int | None:
    """The last round that kept group metrics; None when none did."""
    return await session.scalar(
        select(func.max(GroupMetric.round)).where(GroupMetric.simulation_id == simulation_id)
    )


async def series(
    session: AsyncSession, simulation_id: int, group: int, after_round: int, limit: int
) -> list[tuple[int, dict[str, float | None]]]:
    """One group's values over the rounds after `after_round`, at most `limit` rounds."""
    rows = await session.execute(
        select(GroupMetric.round, GroupMetric.name, GroupMetric.groups, GroupMetric.data)
        .where(GroupMetric.simulation_id == simulation_id, GroupMetric.round > after_round)
        .order_by(GroupMetric.round, GroupMetric.name)
    )
    out: dict[int, dict[str, float | None]] = {}
    for round_number, name, groups, data in rows:
        if group >= groups:
            continue  # the run has fewer groups
        if round_number not in out and len(out) == limit:
            break
        value = float(unpack(data, groups)[group])
        out.setdefault(round_number, {})[name] = None if np.isnan(value) else value
    return list(out.items())


async def by_round(
    session: AsyncSession, simulation_id: int, only_round: int | None = None
) -> AsyncIterator[tuple[int, dict[str, np.ndarray]]]:
    """Every kept round's group metrics in order, a few rounds a query (the export)."""
    kept = await rounds_kept(session, simulation_id, only_round)
    for start in range(0, len(kept), ROUNDS_PER_READ):
        chunk = kept[start : start + ROUNDS_PER_READ]
        rows = await session.execute(
            select(GroupMetric.round, GroupMetric.name, GroupMetric.groups, GroupMetric.data)
            .where(GroupMetric.simulation_id == simulation_id, GroupMetric.round.in_(chunk))
            .order_by(GroupMetric.round, GroupMetric.name)
        )
        rounds: dict[int, dict[str, np.ndarray]] = {}
        for round_number, name, groups, data in rows:
            rounds.setdefault(round_number, {})[name] = unpack(data, groups)
        for round_number in chunk:
            yield round_number, rounds.get(round_number, {})


async def delete_all(session: AsyncSession, simulation_id: int) -> None:
    await session.execute(delete(GroupMetric).where(GroupMetric.simulation_id == simulation_id))
