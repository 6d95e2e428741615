"""The worker registry: the SQL on worker rows (every statement on the workers table is here;
other modules call these functions). Every change of state is followed by the liveness book's
observe() (its event, and the worker's pulse kept or dropped).

Each change is a single conditional statement, so concurrent heartbeats, sweeps and operator
actions cannot interleave into a state nobody asked for (a removed worker is never revived).
Heartbeats of live workers are kept in memory by backend.workers.liveness and written here in
batches (write_beats).
"""

from __future__ import annotations

import logging
import secrets
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import Select, bindparam, case, exists, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import Placement, Worker
from backend.db.times import utcnow
from backend.errors import Conflict, Gone, NotFound
from backend.workers.channels import WorkerCredentials, directory
from backend.workers.schemas import STATS_FIELDS, HeartbeatRequest, RegisterRequest
from backend.workers.secret_box import box
from worker_server.worker_states import (
    DRAINING,
    LIVE_STATES,
    OFFLINE,
    ONLINE,
    PLACING_STATES,
    REMOVED,
)

if TYPE_CHECKING:
    from backend.workers.liveness import Liveness

log = logging.getLogger(__name__)


class UnknownWorker(NotFound):
    what = "worker"


class UnregisteredWorker(UnknownWorker):
    """A worker process's call (with its lease) for an id the manager does not hold."""

    template = "unknown worker {0}: register again"


class LeaseSuperseded(UnknownWorker):
    """The worker exists, but another registration holds it now (a restarted process took it
    over): the caller's lease is stale. An UnknownWorker to whoever holds that lease."""

    http_status = Conflict.http_status
    template = "worker {0} was registered again by another process: register again"


class WorkerRemoved(Gone):
    """The worker was removed: it never beats, drains or comes back under this id."""

    template = "worker {0} was removed"


class RemovedWorkerUnchanged(WorkerRemoved):
    """An operator's drain or undrain of a removed worker, raised with (id, "drained"): a
    conflict with its state."""

    http_status = Conflict.http_status
    template = "worker {0} was removed; it cannot be {1}"


async def holder_of_identity(session: AsyncSession, node: str, slot: int) -> Worker | None:
    """The newest row that is not removed for the identity (node, slot), if any."""
    return await session.scalar(
        select(Worker)
        .where(Worker.node == node, Worker.slot == slot, Worker.state != REMOVED)
        .order_by(Worker.id.desc())
        .limit(1)
    )


async def register(
    session: AsyncSession, liveness: Liveness, req: RegisterRequest, *, reuse: Worker | None = None
) -> Worker:
    """A new worker row, or (reuse) the row of the same identity taken over by a restarted
    process: same id, a fresh lease (the old process's heartbeats now fail), and the drain an
    operator asked for still holds."""
    now = utcnow()
    fields = dict(
        node=req.node,
        slot=req.slot,
        address=req.address,
        pid=req.pid,
        version=req.version,
        capacity=req.capacity,
        lease=secrets.token_hex(16),
        rpc_secret_sealed=box.get().seal(req.rpc_secret, req.address, req.tls),
        tls=req.tls,
        labels=req.labels,
        plugins=req.plugins,
        agents=0,
        cpu_percent=0.0,
        rss_bytes=0,
        inflight_llm_calls=0,
        registered_at=now,
        last_heartbeat=now,
    )
    if reuse is not None:
        stmt = (
            update(Worker)
            .where(Worker.id == reuse.id, Worker.state != REMOVED)
            .values(
                **fields,
                state=case((Worker.drain_requested, DRAINING), else_=ONLINE),
            )
            .returning(Worker)
            .execution_options(synchronize_session=False, populate_existing=True)
        )
        worker = (await session.execute(stmt)).scalar_one_or_none()
        if worker is not None:
            await session.commit()
            _registered(liveness, worker, req.rpc_secret)
            return worker
        await session.rollback()  # removed meanwhile: the identity starts a new row
    worker = Worker(**fields, state=ONLINE, drain_requested=False)
    session.add(worker)
    await session.commit()
    _registered(liveness, worker, req.rpc_secret)
    return worker


def _registered(liveness: Liveness, worker: Worker, rpc_secret: str) -> None:
    directory.remember(worker.address, WorkerCredentials(rpc_secret, worker.tls))
    liveness.observe(worker, beat=True)


async def live_holder_of_address(
    session: AsyncSession, liveness: Liveness, address: str, *, besides: int | None = None
) -> Worker | None:
    """A worker (other than `besides`) that is live at `address`: live in the store, and
    beating within its TTL."""
    query = select(Worker).where(Worker.address == address, Worker.state.in_(LIVE_STATES))
    if besides is not None:
        query = query.where(Worker.id != besides)
    for worker in (await session.scalars(query.order_by(Worker.id.desc()))).all():
        if liveness.is_live(worker.id):
            return worker
    return None


async def mark_offline(session: AsyncSession, liveness: Liveness, worker_id: int) -> None:
    """A worker whose process is known gone (another answers at its address)."""
    try:
        await _set_state(session, liveness, worker_id, state=OFFLINE)
    except (UnknownWorker, WorkerRemoved):
        pass


async def heartbeat(
    session: AsyncSession, liveness: Liveness, worker_id: int, beat: HeartbeatRequest
) -> Worker:
    """A beat the liveness book could not take in memory (the worker is offline, or unknown
    there): one UPDATE that skips removed workers and foreign leases, and brings the worker
    back online (or draining)."""
    return await _set_state(
        session,
        liveness,
        worker_id,
        beat.lease,
        beat=True,
        **beat.model_dump(include=set(STATS_FIELDS)),
        last_heartbeat=utcnow(),
        state=case((Worker.drain_requested, DRAINING), else_=ONLINE),
    )


async def write_beats(session: AsyncSession, beats: list[dict]) -> None:
    """Batched: the stats and beat times of live workers (dicts of id, lease, last_heartbeat
    and STATS_FIELDS), in one executemany; a row that left the live states or changed hands
    meanwhile is left alone."""
    table = Worker.__table__
    stmt = (
        update(table)
        .where(
            table.c.id == bindparam("b_id"),
            table.c.lease == bindparam("b_lease"),
            # Spelled out: an IN list cannot be expanded in an executemany.
            or_(*(table.c.state == state for state in LIVE_STATES)),
        )
        .values(
            last_heartbeat=bindparam("b_last_heartbeat"),
            **{field: bindparam(f"b_{field}") for field in STATS_FIELDS},
        )
    )
    params = [{f"b_{key}": value for key, value in beat.items()} for beat in beats]
    await session.execute(stmt, params)
    await session.commit()


async def mark_silent(
    session: AsyncSession,
    worker_id: int,
    lease: str,
    *,
    last_heartbeat: datetime,
    stats: dict,
) -> Worker | None:
    """A live worker whose beats stopped goes offline, keeping its last beat time and stats;
    None when the row is no longer this lease's or no longer live."""
    stmt = (
        update(Worker)
        .where(Worker.id == worker_id, Worker.lease == lease, Worker.state.in_(LIVE_STATES))
        .values(state=OFFLINE, last_heartbeat=last_heartbeat, **stats)
        .returning(Worker)
        .execution_options(synchronize_session=False, populate_existing=True)
    )
    worker = (await session.execute(stmt)).scalar_one_or_none()
    await session.commit()
    return worker


async def _raise_why_not_live(session: AsyncSession, worker_id: int, lease: str | None) -> None:
    """Missing -> UnknownWorker (UnregisteredWorker to a lease holder); another registration's
    lease -> LeaseSuperseded; removed -> WorkerRemoved."""
    row = (
        await session.execute(select(Worker.state, Worker.lease).where(Worker.id == worker_id))
    ).one_or_none()
    if row is None:
        raise UnknownWorker(worker_id) if lease is None else UnregisteredWorker(worker_id)
    if lease is not None and row.lease != lease:
        raise LeaseSuperseded(worker_id)
    raise WorkerRemoved(worker_id)


async def _set_state(
    session: AsyncSession,
    liveness: Liveness,
    worker_id: int,
    lease: str | None = None,
    *,
    beat: bool = False,
    **values,
) -> Worker:
    """Update a worker that is not removed; with a lease, only the registration holding it."""
    conditions = [Worker.id == worker_id, Worker.state != REMOVED]
    if lease is not None:
        conditions.append(Worker.lease == lease)
    stmt = (
        update(Worker)
        .where(*conditions)
        .values(**values)
        .returning(Worker)
        .execution_options(synchronize_session=False, populate_existing=True)
    )
    worker = (await session.execute(stmt)).scalar_one_or_none()
    await session.commit()
    if worker is None:
        await _raise_why_not_live(session, worker_id, lease)
    liveness.observe(worker, beat=beat)
    return worker


async def drain(session: AsyncSession, liveness: Liveness, worker_id: int) -> Worker:
    # An offline worker keeps its state; drain_requested makes it come back as draining.
    state = case((Worker.state == OFFLINE, OFFLINE), else_=DRAINING)
    try:
        return await _set_state(session, liveness, worker_id, drain_requested=True, state=state)
    except WorkerRemoved:
        raise RemovedWorkerUnchanged(worker_id, "drained") from None


async def undrain(session: AsyncSession, liveness: Liveness, worker_id: int) -> Worker:
    """Undo a drain: a draining worker is online again and takes new agents; an offline one
    comes back online rather than draining."""
    state = case((Worker.state == DRAINING, ONLINE), else_=Worker.state)
    try:
        return await _set_state(session, liveness, worker_id, drain_requested=False, state=state)
    except WorkerRemoved:
        raise RemovedWorkerUnchanged(worker_id, "undrained") from None


async def remove(
    session: AsyncSession, liveness: Liveness, worker_id: int, lease: str | None = None
) -> None:
    """Mark removed (by an operator, or by the worker itself with its lease); idempotent."""
    try:
        await _set_state(session, liveness, worker_id, lease, state=REMOVED)
    except WorkerRemoved:
        pass


async def grant_grace(session: AsyncSession) -> list[Worker]:
    """Start every live worker's beat time afresh (at manager start-up: a worker must not be
    marked offline for the minutes the manager itself was down); returns the live workers."""
    stmt = (
        update(Worker)
        .where(Worker.state.in_(LIVE_STATES))
        .values(last_heartbeat=utcnow())
        .returning(Worker)
        .execution_options(synchronize_session=False, populate_existing=True)
    )
    workers = list((await session.execute(stmt)).scalars())
    await session.commit()
    return workers


async def get(session: AsyncSession, worker_id: int) -> Worker:
    worker = await session.get(Worker, worker_id, populate_existing=True)
    if worker is None:
        raise UnknownWorker(worker_id)
    return worker


async def page(
    session: AsyncSession, *, after: int | None, limit: int, state: str | None
) -> tuple[list[Worker], int | None]:
    """Keyset page ordered by id; removed workers only when asked for by state."""
    stmt = select(Worker).order_by(Worker.id).limit(limit + 1)
    if after is not None:
        stmt = stmt.where(Worker.id > after)
    if state is not None:
        stmt = stmt.where(Worker.state == state)
    else:
        stmt = stmt.where(Worker.state != REMOVED)
    rows = list((await session.execute(stmt)).scalars())
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (rows[-1].id if more else None)


# -- reads for the other parts (deploys, repairs, clean-ups, rounds, interviews) -------------


async def by_ids(session: AsyncSession, ids: list[int]) -> dict[int, Worker]:
    """The rows of these workers (any state), by id."""
    rows = await session.scalars(select(Worker).where(Worker.id.in_(ids)))
    return {worker.id: worker for worker in rows}


async def live_addresses(session: AsyncSession, ids: list[int] | None = None) -> set[str]:
    """The addresses of the live workers (of these ids, when given)."""
    stmt = select(Worker.address).where(Worker.state.in_(LIVE_STATES))
    if ids is not None:
        stmt = stmt.where(Worker.id.in_(ids))
    return set(await session.scalars(stmt))


async def live_address(session: AsyncSession, worker_id: int) -> str | None:
    """The worker's address when it is live, else None."""
    return await session.scalar(
        select(Worker.address).where(Worker.id == worker_id, Worker.state.in_(LIVE_STATES))
    )


async def live_workers(session: AsyncSession) -> list[tuple[int, str]]:
    """(id, address) of every live worker, by id."""
    stmt = select(Worker.id, Worker.address).where(Worker.state.in_(LIVE_STATES))
    return [(wid, address) for wid, address in await session.execute(stmt.order_by(Worker.id))]


async def placing_workers(session: AsyncSession) -> list[tuple[int, str, int, int, str, dict]]:
    """(id, address, capacity, agents, node, labels) of the workers that take new agents."""
    rows = await session.execute(
        select(
            Worker.id, Worker.address, Worker.capacity, Worker.agents, Worker.node, Worker.labels
        )
        .where(Worker.state.in_(PLACING_STATES))
        .order_by(Worker.id)
    )
    return [tuple(row) for row in rows]


async def totals_by_state(session: AsyncSession) -> list[tuple[str, int, int, int, int]]:
    """(state, workers, agents, capacity, LLM calls in flight) summed per state, as last
    reported (for the metrics scrape: one grouped query)."""
    rows = await session.execute(
        select(
            Worker.state,
            func.count(),
            func.coalesce(func.sum(Worker.agents), 0),
            func.coalesce(func.sum(Worker.capacity), 0),
            func.coalesce(func.sum(Worker.inflight_llm_calls), 0),
        ).group_by(Worker.state)
    )
    return [tuple(row) for row in rows]


def removed_ids() -> Select:
    """The ids of removed workers, as a subquery for statements on other tables."""
    return select(Worker.id).where(Worker.state == REMOVED)


async def gone_hosting(session: AsyncSession, offline_before: datetime) -> list[int]:
    """Workers that still have agents placed on them but will not serve them again: removed,
    or offline since before `offline_before`."""
    stmt = select(Worker.id).where(
        (Worker.state == REMOVED)
        | ((Worker.state == OFFLINE) & (Worker.last_heartbeat < offline_before)),
        exists().where(Placement.worker_id == Worker.id),
    )
    return list(await session.scalars(stmt))


async def load_directory(session: AsyncSession) -> int:
    """Fill the channel directory from the store (a restarted manager): every worker that is
    not removed, its secret opened with this manager's key. Returns how many it remembered.

    A secret that does not open (sealed with another key, its row's address changed, or a row
    from before secrets were sealed) cannot be used: that worker's lease is replaced, so its
    next heartbeat is told to register again (409) and brings a secret this manager can use.
    The worker keeps its id and its agents (it registers with the same identity)."""
    rows = await session.execute(
        select(Worker.id, Worker.address, Worker.rpc_secret_sealed, Worker.tls)
        .where(Worker.state != REMOVED)
        .order_by(Worker.id)
    )
    count, unusable = 0, []
    sealing = box.get()
    for worker_id, address, sealed, tls in rows:
        secret = sealing.open(sealed, address, bool(tls))
        if secret is None:
            unusable.append(worker_id)
            continue
        directory.remember(address, WorkerCredentials(secret, bool(tls)))
        count += 1
    for worker_id in unusable:
        await session.execute(
            update(Worker).where(Worker.id == worker_id).values(lease=secrets.token_hex(16))
        )
    await session.commit()
    if unusable:
        log.warning(
            "the RPC secrets of %d worker(s) do not open with this manager's worker secret key "
            "(another key, or stored before secrets were sealed): they are asked to register "
            "again (workers %s)",
            len(unusable),
            ", ".join(map(str, unusable[:20])) + (" ..." if len(unusable) > 20 else ""),
        )
    return count
