"""SQLAlchemy models. Timestamps are naive UTC: SQLite has no time zones, so we keep one convention."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    false,
    func,
    select,
    text,
    true,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, column_property, mapped_column

from backend.lifecycles.decision import DECISION_STATUSES
from backend.lifecycles.interview import INTERVIEW_STATUSES
from backend.lifecycles.population import POPULATION_STATUSES
from backend.lifecycles.simulation import ACTIVE as ACTIVE_SIMULATION_STATUSES
from backend.lifecycles.simulation import SIMULATION_STATUSES, TIMELINE_KINDS
from backend.lifecycles.sweep import SWEEP_STATUSES
from backend.simulations.validity import DEFAULT_PARTICIPATION_FLOOR
from worker_server.worker_states import WORKER_STATES

# Storage ranges of the id columns: workers, populations and simulations are Integer (int32),
# agents BigInteger. Input is checked against them (backend.api.params) before it reaches SQL.
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

# Every status column is checked against its lifecycle's states (backend/lifecycles/).

# JSONB on Postgres so attribute filters (`attributes @> '{"education": "doctorate"}'`) use a GIN
# index; SQLite stores JSON text and filters with json_extract.
AttributesJSON = JSON().with_variant(JSONB(), "postgresql")


class Base(DeclarativeBase):
    pass


class Worker(Base):
    """One worker process (a gRPC server); a node running --procs N has N rows."""

    __tablename__ = "workers"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    node: Mapped[str] = mapped_column(String(255))
    # The process's index on its node: (node, slot) is the worker's identity, so a restarted
    # process registers as the same worker and is given its agents back. None: no identity
    # (every registration is a new worker).
    slot: Mapped[int | None] = mapped_column(Integer, nullable=True)
    address: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    version: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(16))
    # A secret per registration that heartbeats must present: ids restart with a fresh store,
    # so a worker holding a stale id must not be able to beat (or deregister) another's row.
    lease: Mapped[str] = mapped_column(String(64))
    # What the manager presents on the worker's gRPC calls (the worker chose it and proved it
    # holds it at registration), sealed with the manager's key (backend.workers.secret_box):
    # the store never holds it in the clear. Never served by the API.
    rpc_secret_sealed: Mapped[str | None] = mapped_column(String(512), nullable=True)
    # Whether the worker's gRPC port speaks TLS.
    tls: Mapped[bool] = mapped_column(Boolean, default=False)
    # Its node's labels (worker_server.labels), matched by a population's node_selector.
    labels: Mapped[dict[str, str]] = mapped_column(JSON, default=dict, server_default="{}")
    # The simulation plugins it can run, {name: version}, as it reported at registration: a
    # launch is refused where a host lacks the run's plugin (backend.simulations.plugin_hosts).
    plugins: Mapped[dict[str, str]] = mapped_column(JSON, default=dict, server_default="{}")
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
        # Live workers by state (placement, the reaper, the liveness book at start-up).
        Index("ix_workers_state_last_heartbeat", "state", "last_heartbeat"),
        Index("ix_workers_node_slot", "node", "slot"),
    )


class Population(Base):
    """A deployed (or deploying, or deleted) population; the row outlives its agents as history."""

    __tablename__ = "populations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(200))
    size: Mapped[int] = mapped_column(BigInteger)
    seed: Mapped[int] = mapped_column(BigInteger)
    status: Mapped[str] = mapped_column(String(16))
    config: Mapped[dict[str, Any]] = mapped_column(JSON)  # the validated config
    counts: Mapped[dict[str, Any]] = mapped_column(JSON)  # {distribution: {category: n}}
    # Agents a live worker hosts (== size when deployed, fewer when degraded).
    hosted: Mapped[int] = mapped_column(BigInteger, default=0, server_default=text("0"))
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    # A population with a graph: its statistics (backend.populations.graph) and its file's
    # path; null without a graph (and until the deploy has written it).
    graph: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    updated_at: Mapped[datetime] = mapped_column(DateTime)

    __table_args__ = (
        CheckConstraint(f"status IN {POPULATION_STATUSES!r}", name="ck_populations_status"),
    )


class Placement(Base):
    """A run of a population's agents, ids [start, stop), placed on one worker (None: on none).

    Placement is kept by id ranges, a handful of rows per population, not a column per agent:
    re-placing half of 10^6 agents rewrites a few ranges instead of 500,000 rows and their
    indexes. A population's ranges are disjoint and cover exactly its agents' rows (the store
    module, the only writer, keeps them so in the transactions that add or delete agents).
    """

    __tablename__ = "placements"

    population_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    start: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    stop: Mapped[int] = mapped_column(BigInteger)
    worker_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # Agents whose worker was offline when their population was deleted (by earlier versions):
    # the rows stay until the worker returns and confirms their removal.
    orphaned: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())

    __table_args__ = (Index("ix_placements_worker_id", "worker_id"),)


class Agent(Base):
    """One agent. Its id is (population_id << 32) | index, assigned by the manager: globally
    unique, ordered within a population, a population is one id range, and no sequence is needed
    (so bulk COPY needs no round trip for ids). Where it is placed is its Placement range's."""

    __tablename__ = "agents"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    # No foreign keys: checking them costs most of a 10^6-row COPY (about 14 of 18 s on Postgres),
    # ids already encode the population, population and worker rows are never deleted (only
    # marked), and the store module is the only writer.
    population_id: Mapped[int] = mapped_column(Integer)
    # {attribute name: category string or number}
    attributes: Mapped[dict[str, Any]] = mapped_column(AttributesJSON)
    persona: Mapped[str] = mapped_column(Text)

    __table_args__ = (
        Index("ix_agents_population_id_id", "population_id", "id"),
        Index(
            "ix_agents_attributes",
            "attributes",
            postgresql_using="gin",
            postgresql_ops={"attributes": "jsonb_path_ops"},
        ).ddl_if(dialect="postgresql"),
    )


def _placement_of_agent(column: str):
    """A column of the range holding the agent (one probe of the placements' primary key)."""
    return (
        select(getattr(Placement, column))
        .where(
            Placement.population_id == Agent.population_id,
            Placement.start <= Agent.id,
            Placement.stop > Agent.id,
        )
        .correlate_except(Placement)
        .limit(1)
        .scalar_subquery()
    )


# Read with each loaded agent (a page of them at a time); never filter on these: the store
# filters agents by walking the placements' ranges instead.
Agent.worker_id = column_property(_placement_of_agent("worker_id"))
Agent.orphaned = column_property(
    func.coalesce(_placement_of_agent("orphaned"), false()).label("orphaned")
)


class Simulation(Base):
    """One run of the game over a population. Like populations, rows are never deleted, and they
    name their population without a foreign key: a deleted population keeps its simulations'
    results (its row stays too, marked deleted)."""

    __tablename__ = "simulations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    population_id: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16))
    rounds: Mapped[int] = mapped_column(Integer)
    current_round: Mapped[int] = mapped_column(Integer, default=0)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)  # validated; no secret (keys: on workers)
    seed: Mapped[int] = mapped_column(BigInteger)
    models: Mapped[list[str]] = mapped_column(JSON)  # LLM model names in use ([] otherwise)
    version: Mapped[str] = mapped_column(String(64))  # the populace package that ran it
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    # Why a run ended before its last round without failing (e.g. "converged").
    stop_reason: Mapped[str | None] = mapped_column(String(64), nullable=True)
    # Why a run is paused (an operator, a dead LLM endpoint, agents that could not be re-placed).
    pause_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    # Rounds that committed with lost agents (only with allow_partial), and how many in all.
    lost_agents: Mapped[int] = mapped_column(BigInteger, default=0, server_default=text("0"))
    # Rounds kept with fewer valid answers than the run's participation floor
    # (backend.simulations.validity): a run with any is not whole.
    rounds_below_floor: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))
    # Its config's participation_floor, here so the store counts in SQL.
    participation_floor: Mapped[float] = mapped_column(
        Float,
        default=DEFAULT_PARTICIPATION_FLOOR,
        server_default=text(str(DEFAULT_PARTICIPATION_FLOOR)),
    )
    prompt_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    # Of prompt_tokens, those the LLM servers took from their prefix cache.
    cached_prompt_tokens: Mapped[int] = mapped_column(
        BigInteger, default=0, server_default=text("0")
    )
    completion_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    # Why an operator cancelled it (free text they gave), shown with the run.
    cancel_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    # The reproducibility record beyond config and seed: worker placement, each endpoint's
    # model id as /v1/models reported it, the simulation it re-runs (backend.simulations.record).
    record: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict, server_default="{}")
    # Each round keeps only the decisions that changed since the round before (round 1: all);
    # readers carry the others forward (backend.simulations.carried). Network simulations.
    stores_changes: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # A run grouped by an attribute (config group_by): group g's category name, labels[g].
    group_labels: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    # Set when a sweep launched it: the sweep and this run's point of its grid.
    sweep_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    sweep_params: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    started_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)

    __table_args__ = (
        CheckConstraint(f"status IN {SIMULATION_STATUSES!r}", name="ck_simulations_status"),
        Index("ix_simulations_population_id_id", "population_id", "id"),
        Index("ix_simulations_sweep_id_id", "sweep_id", "id"),
        # One active simulation per population, enforced by the database so two concurrent
        # POSTs cannot both win.
        Index(
            "ux_simulations_active_population",
            "population_id",
            unique=True,
            sqlite_where=text(f"status IN {ACTIVE_SIMULATION_STATUSES!r}"),
            postgresql_where=text(f"status IN {ACTIVE_SIMULATION_STATUSES!r}"),
        ),
    )


class SimulationRound(Base):
    """One round's statistics, written in the same transaction as the round's decisions."""

    __tablename__ = "rounds"

    simulation_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    round: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    n_valid: Mapped[int] = mapped_column(BigInteger)
    n_invalid: Mapped[int] = mapped_column(BigInteger)
    n_late: Mapped[int] = mapped_column(BigInteger)
    # Agents no live worker hosted for the round (only with allow_partial; otherwise 0).
    n_lost: Mapped[int] = mapped_column(BigInteger, default=0, server_default=text("0"))
    mean: Mapped[float | None] = mapped_column(Float, nullable=True)
    median: Mapped[float | None] = mapped_column(Float, nullable=True)
    std: Mapped[float | None] = mapped_column(Float, nullable=True)
    min: Mapped[float | None] = mapped_column(Float, nullable=True)
    max: Mapped[float | None] = mapped_column(Float, nullable=True)
    target: Mapped[float | None] = mapped_column(Float, nullable=True)
    winner_value: Mapped[float | None] = mapped_column(Float, nullable=True)
    winner_count: Mapped[int] = mapped_column(BigInteger, default=0)
    winner_agents: Mapped[list[int]] = mapped_column(JSON)  # the first winners by id, capped
    histogram: Mapped[list[int]] = mapped_column(JSON)
    # {attribute: {category: {"count": n, "mean": m, "std": s}}}
    segments: Mapped[dict[str, Any]] = mapped_column(JSON)
    # The round's declared metrics, {name: value} (backend.simulations.metrics_declared): the
    # generic record beside the game's own columns above.
    metrics: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # A mixed policy's round by part, {label: {agents, n_valid, n_invalid, n_late, n_lost,
    # mean}} (backend.simulations.mixture); {} for one policy, null for rounds kept before it.
    metrics_by_policy: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    prompt_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    # Of prompt_tokens, those the LLM servers took from their prefix cache (0 when not reported).
    cached_prompt_tokens: Mapped[int] = mapped_column(
        BigInteger, default=0, server_default=text("0")
    )
    completion_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    llm_errors: Mapped[int] = mapped_column(BigInteger, default=0)
    # Requests sent to LLM servers (retries included); fewer than agents when identical prompts
    # shared one.
    llm_requests: Mapped[int] = mapped_column(BigInteger, default=0, server_default=text("0"))
    # A network simulation: bytes of values the workers sent each other (worker to worker).
    network_bytes: Mapped[int] = mapped_column(BigInteger, default=0, server_default=text("0"))
    # Decision rows the round wrote: every agent's, or in a run that stores changes only those
    # that changed (None for rounds kept before it was counted).
    decisions_stored: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    # The LLM meters per endpoint: [{base_url, model, requests, errors, skipped, late,
    # prompt_tokens, completion_tokens, latency_p50_s, latency_p95_s, ...}] (backend.rounds.meters)
    endpoints: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list, server_default="[]")
    duration_s: Mapped[float] = mapped_column(Float)
    finished_at: Mapped[datetime] = mapped_column(DateTime)


class GroupMetric(Base):
    """One group metric of one round (Resolution.group_metrics): a value per group, kept as
    zlib-compressed little-endian float64 (a group's figures are mostly alike: consensus flags,
    rounds), written in the same transaction as the round (backend.simulations.group_store)."""

    __tablename__ = "group_metrics"

    simulation_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    round: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    groups: Mapped[int] = mapped_column(Integer)  # values in the array
    data: Mapped[bytes] = mapped_column(LargeBinary)


class Decision(Base):
    """One agent's answer in one round. The primary key is the export order (round, agent), so
    a keyset scan of it streams a simulation's decisions without sorting."""

    __tablename__ = "decisions"

    simulation_id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    round: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    agent_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    value: Mapped[float | None] = mapped_column(Float, nullable=True)  # None unless valid
    status: Mapped[str] = mapped_column(String(8))
    response: Mapped[str | None] = mapped_column(Text, nullable=True)  # with store_responses

    __table_args__ = (
        CheckConstraint(f"status IN {DECISION_STATUSES!r}", name="ck_decisions_status"),
        # On SQLite the rows live in the primary key's b-tree: one tree to write instead of two
        # (about 30% faster bulk inserts and a third less space).
        {"sqlite_with_rowid": False},
    )


SWEEP_MODES = ("sequence", "parallel")


class Sweep(Base):
    """An experiment: one simulation per point of a grid over config fields, launched as one
    unit. Its runs are simulations with sweep_id set; the grid itself is in config."""

    __tablename__ = "sweeps"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16))
    mode: Mapped[str] = mapped_column(String(16))
    config: Mapped[dict[str, Any]] = mapped_column(JSON)  # the validated sweep file
    runs: Mapped[int] = mapped_column(Integer)  # points in the grid
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)

    __table_args__ = (
        CheckConstraint(f"status IN {SWEEP_STATUSES!r}", name="ck_sweeps_status"),
        CheckConstraint(f"mode IN {SWEEP_MODES!r}", name="ck_sweeps_mode"),
    )


class Interview(Base):
    """A free-form question put to one agent after (or during) a run, and its answer, kept with
    the run."""

    __tablename__ = "interviews"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    simulation_id: Mapped[int] = mapped_column(Integer)
    agent_id: Mapped[int] = mapped_column(BigInteger)
    question: Mapped[str] = mapped_column(Text)
    # The exact prompt the worker sent, and what came back.
    prompt: Mapped[str] = mapped_column(Text, default="")
    answer: Mapped[str] = mapped_column(Text, default="")
    status: Mapped[str] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    model: Mapped[str] = mapped_column(String(255), default="")
    prompt_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    completion_tokens: Mapped[int] = mapped_column(BigInteger, default=0)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)

    __table_args__ = (
        CheckConstraint(f"status IN {INTERVIEW_STATUSES!r}", name="ck_interviews_status"),
        Index("ix_interviews_agent_simulation_id", "agent_id", "simulation_id", "id"),
        Index("ix_interviews_simulation_id_id", "simulation_id", "id"),
    )


# The kinds of a run timeline's entries (backend.lifecycles.simulation).
RUN_EVENT_KINDS = TIMELINE_KINDS


class RunEvent(Base):
    """One entry of a run's timeline (backend.simulations.timeline): what happened to it and
    when, in the order it happened. Deleted with its simulation."""

    __tablename__ = "run_events"

    # BigInteger on Postgres (one entry per round of every run adds up); SQLite's rowid alias
    # must be INTEGER to autoincrement.
    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True
    )
    simulation_id: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(16))
    round: Mapped[int | None] = mapped_column(Integer, nullable=True)
    message: Mapped[str] = mapped_column(Text)
    # The figures behind the message (a round's mean and duration, a reason), for the UI.
    data: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict, server_default="{}")
    created_at: Mapped[datetime] = mapped_column(DateTime)
    # Announced yet (`timeline.added`, alerts)? Written false with the change it records, set
    # once announced (backend.simulations.timeline.RunTimeline, the outbox's reader).
    published: Mapped[bool] = mapped_column(Boolean, default=False, server_default=true())

    __table_args__ = (
        CheckConstraint(f"kind IN {RUN_EVENT_KINDS!r}", name="ck_run_events_kind"),
        Index("ix_run_events_simulation_id_id", "simulation_id", "id"),
        Index(
            "ix_run_events_unpublished",
            "id",
            sqlite_where=text("NOT published"),
            postgresql_where=text("NOT published"),
        ),
    )
