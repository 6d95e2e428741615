"""The worker registry: every state change of a worker row, each followed by its event.

Each change is a single conditional statement, so concurrent heartbeats, sweeps and operator
actions cannot interleave into a state nobody asked for (a removed worker is never revived).
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta

from sqlalchemy import case, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from backend.db.models import Worker
from backend.events.hub import EventHub
from backend.workers.channels import WorkerCredentials, directory
from backend.workers.schemas import HeartbeatRequest, RegisterRequest, WorkerOut

CLUSTER_TOPIC = "cluster"


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class UnknownWorker(LookupError):
    pass


class LeaseSuperseded(UnknownWorker):
    """The worker exists, but another registration holds it now (a restarted process took it
    over): the caller's lease is stale."""


class WorkerRemoved(Exception):
    pass


def publish_worker(hub: EventHub, worker: Worker) -> None:
    hub.publish(
        CLUSTER_TOPIC,
        "worker.updated",
        {"worker": WorkerOut.model_validate(worker).model_dump(mode="json")},
    )


async def holder_of_identity(session: AsyncSession, node: str, slot: int) -> Worker | None:
    """The newest row that is not removed for the identity (node, slot), if any."""
    return await session.scalar(
        select(Worker)
        .where(Worker.node == node, Worker.slot == slot, Worker.state != "removed")
        .order_by(Worker.id.desc())
        .limit(1)
    )


async def register(
    session: AsyncSession, hub: EventHub, req: RegisterRequest, *, reuse: Worker | None = None
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
        rpc_secret=req.rpc_secret,
        tls=req.tls,
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
            .where(Worker.id == reuse.id, Worker.state != "removed")
            .values(
                **fields,
                state=case((Worker.drain_requested, "draining"), else_="online"),
            )
            .returning(Worker)
            .execution_options(synchronize_session=False, populate_existing=True)
        )
        worker = (await session.execute(stmt)).scalar_one_or_none()
        if worker is not None:
            await session.commit()
            _registered(hub, worker)
            return worker
        await session.rollback()  # removed meanwhile: the identity starts a new row
    worker = Worker(**fields, state="online", drain_requested=False)
    session.add(worker)
    await session.commit()
    _registered(hub, worker)
    return worker


def _registered(hub: EventHub, worker: Worker) -> None:
    directory.remember(worker.address, WorkerCredentials(worker.rpc_secret or "", worker.tls))
    publish_worker(hub, worker)


async def live_holder_of_address(
    session: AsyncSession, address: str, ttl_s: float, *, besides: int | None = None
) -> Worker | None:
    """A worker (other than `besides`) that is live at `address` as far as the store knows."""
    query = select(Worker).where(
        Worker.address == address,
        Worker.state.in_(("online", "draining")),
        Worker.last_heartbeat > utcnow() - timedelta(seconds=ttl_s),
    )
    if besides is not None:
        query = query.where(Worker.id != besides)
    return await session.scalar(query.order_by(Worker.id.desc()).limit(1))


async def mark_offline(session: AsyncSession, hub: EventHub, worker_id: int) -> None:
    """A worker whose process is known gone (another answers at its address)."""
    try:
        await _set_state(session, hub, worker_id, state="offline")
    except (UnknownWorker, WorkerRemoved):
        pass


async def heartbeat(
    session: AsyncSession, hub: EventHub, worker_id: int, beat: HeartbeatRequest
) -> Worker:
    """Record stats and liveness in one UPDATE that skips removed workers and foreign leases."""
    return await _set_state(
        session,
        hub,
        worker_id,
        beat.lease,
        **beat.model_dump(exclude={"lease"}),
        last_heartbeat=utcnow(),
        state=case((Worker.drain_requested, "draining"), else_="online"),
    )


async def _raise_why_not_live(session: AsyncSession, worker_id: int, lease: str | None) -> None:
    """Missing -> UnknownWorker; another registration's lease -> LeaseSuperseded; removed ->
    WorkerRemoved."""
    row = (
        await session.execute(select(Worker.state, Worker.lease).where(Worker.id == worker_id))
    ).one_or_none()
    if row is None:
        raise UnknownWorker(worker_id)
    if lease is not None and row.lease != lease:
        raise LeaseSuperseded(worker_id)
    raise WorkerRemoved(worker_id)


async def _set_state(
    session: AsyncSession, hub: EventHub, worker_id: int, lease: str | None = None, **values
) -> Worker:
    """Update a live worker; with a lease, only the registration holding it."""
    conditions = [Worker.id == worker_id, Worker.state != "removed"]
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
    publish_worker(hub, worker)
    return worker


async def drain(session: AsyncSession, hub: EventHub, worker_id: int) -> Worker:
    # An offline worker keeps its state; drain_requested makes it come back as draining.
    state = case((Worker.state == "offline", "offline"), else_="draining")
    return await _set_state(session, hub, worker_id, drain_requested=True, state=state)


async def remove(
    session: AsyncSession, hub: EventHub, worker_id: int, lease: str | None = None
) -> None:
    """Mark removed (by an operator, or by the worker itself with its lease); idempotent."""
    try:
        await _set_state(session, hub, worker_id, lease, state="removed")
    except WorkerRemoved:
        pass


async def grant_grace(session: AsyncSession) -> int:
    """Start every live worker's TTL afresh (at manager start-up): a worker must not be marked
    offline for the minutes the manager itself was down, before it had a TTL to heartbeat."""
    result = await session.execute(
        update(Worker)
        .where(Worker.state.in_(("online", "draining")))
        .values(last_heartbeat=utcnow())
        .execution_options(synchronize_session=False)
    )
    await session.commit()
    return result.rowcount


async def mark_silent_offline(
    session: AsyncSession,
    hub: EventHub,
    ttl_s: float,
    *,
    spare_registered_before: datetime | None = None,
) -> list[Worker]:
    """Turn every live worker whose last heartbeat is older than the TTL offline (but not those
    registered before spare_registered_before: a restarted manager's grace)."""
    cutoff = utcnow() - timedelta(seconds=ttl_s)
    conditions = [Worker.state.in_(("online", "draining")), Worker.last_heartbeat < cutoff]
    if spare_registered_before is not None:
        conditions.append(Worker.registered_at >= spare_registered_before)
    stmt = (
        update(Worker)
        .where(*conditions)
        .values(state="offline")
        .returning(Worker)
        .execution_options(synchronize_session=False, populate_existing=True)
    )
    workers = list((await session.execute(stmt)).scalars())
    await session.commit()
    for worker in workers:
        publish_worker(hub, worker)
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
        stmt = stmt.where(Worker.state != "removed")
    rows = list((await session.execute(stmt)).scalars())
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, (rows[-1].id if more else None)
