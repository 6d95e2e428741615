"""SQLAlchemy models. Timestamps are naive UTC: SQLite has no time zones, so we keep one convention."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, CheckConstraint, DateTime, Float, Index, Integer, String
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

WORKER_STATES = ("online", "offline", "draining", "removed")


class Base(DeclarativeBase):
    pass


class Worker(Base):
    """One worker process (a gRPC server); a node running --procs N has N rows."""

    __tablename__ = "workers"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    node: Mapped[str] = mapped_column(String(255))
    address: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    version: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(16))
    # A secret per registration that heartbeats must present: ids restart with a fresh store,
    # so a worker holding a stale id must not be able to beat (or deregister) another's row.
    lease: Mapped[str] = mapped_column(String(64))
    # Kept apart from state so a draining worker that goes offline and comes back is draining again.
    drain_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    agents: Mapped[int] = mapped_column(BigInteger, default=0)
    capacity: Mapped[int] = mapped_column(BigInteger, default=0)
    cpu_percent: Mapped[float] = mapped_column(Float, default=0.0)
    rss_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    inflight_llm_calls: Mapped[int] = mapped_column(Integer, default=0)
    registered_at: Mapped[datetime] = mapped_column(DateTime)
    last_heartbeat: Mapped[datetime] = mapped_column(DateTime)

    __table_args__ = (
        CheckConstraint(f"state IN {WORKER_STATES!r}", name="ck_workers_state"),
        # The liveness sweep looks for live workers whose heartbeat is older than the TTL.
        Index("ix_workers_state_last_heartbeat", "state", "last_heartbeat"),
    )
