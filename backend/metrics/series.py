"""The manager's Prometheus series, in a registry of its own per app.

Nothing here is per agent or on a request's hot path. Rounds, decisions, LLM usage and deploy
progress are counted from the events the manager already publishes (one per round or per
stage: see `ManagerMetrics.on_event`); heartbeat gaps from the liveness book; DB commit times
from the engine's transaction events; the cluster's workers, agents and capacity, and the
populations and runs by status, are read from the store when Prometheus scrapes (`refresh`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from backend.events.catalog import (
    Event,
    PopulationProgress,
    RoundCompleted,
    RoundProgress,
    SimulationDeleted,
    SimulationUpdated,
)
from backend.events.hub import EventHub
from backend.lifecycles import decision, simulation
from backend.lifecycles import population as population_lifecycle
from backend.lifecycles.deploy import DEPLOY_STAGES
from backend.populations import store as population_store
from backend.rounds.meters import usage_of_meter
from backend.simulations import store as simulation_store
from backend.workers import registry
from backend.workers.schemas import LIVE_STATES
from worker_server.metrics import ROUND_BUCKETS_S, EndpointSeries

HEARTBEAT_GAP_BUCKETS_S = (0.1, 0.25, 0.5, 1, 1.5, 2, 3, 5, 10, 20, 30, 60, 120, 300)
DB_BUCKETS_S = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
# A run ends (for the counter of ended runs) when it reaches one of these.
ENDED = frozenset({*simulation.FINAL, simulation.PAUSED})
_BEGAN = "populace_metrics_began"


@dataclass
class StoreView:
    """What the store said at the last scrape."""

    ok: bool = False
    # state -> (workers, agents, capacity, LLM calls in flight)
    workers: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)
    populations: dict[str, int] = field(default_factory=dict)
    simulations: dict[str, int] = field(default_factory=dict)


class _StoreCollector(Collector):
    """Gauges of the store view, and the event hub's figures, read at collection time."""

    def __init__(self, hub: EventHub | None) -> None:
        self.hub = hub
        self.view = StoreView()

    def collect(self) -> Iterator[Metric]:
        view = self.view
        up = GaugeMetricFamily(
            "populace_store_up", "1 when the last scrape could read the store, else 0."
        )
        up.add_metric([], 1 if view.ok else 0)
        yield up
        per_state = {
            "workers": ("Workers by state.", 0),
            "agents": ("Agents the workers last reported hosting, by worker state.", 1),
            "capacity": ("Agents the workers can host, by worker state.", 2),
            "llm_inflight_calls": ("LLM requests on the wire, by worker state.", 3),
        }
        for name, (doc, index) in per_state.items():
            family = GaugeMetricFamily(f"populace_cluster_{name}", doc, labels=["state"])
            for state, figures in sorted(view.workers.items()):
                family.add_metric([state], figures[index])
            yield family
        for name, counts in (("populations", view.populations), ("simulations", view.simulations)):
            family = GaugeMetricFamily(
                f"populace_{name}", f"{name.title()} by status.", labels=["status"]
            )
            for status, n in sorted(counts.items()):
                family.add_metric([status], n)
            yield family
        hub = self.hub
        subscribers = GaugeMetricFamily(
            "populace_event_subscribers", "Dashboards and CLIs following live events now."
        )
        published = CounterMetricFamily("populace_events_published", "Events published.")
        dropped = CounterMetricFamily(
            "populace_event_subscribers_dropped",
            "Subscribers dropped for falling behind (they reconnect and catch up).",
        )
        if hub is not None:
            subscribers.add_metric([], hub.subscriber_count)
            published.add_metric([], hub.seq)
            dropped.add_metric([], hub.dropped)
        yield from (subscribers, published, dropped)


class ManagerMetrics:
    def __init__(self, hub: EventHub | None = None) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.store = _StoreCollector(hub)
        r.register(self.store)
        ProcessCollector(registry=r)  # the manager's own CPU and RSS (process_*)
        self._round_series(r)
        self.endpoints = EndpointSeries("populace", "all workers, counted when a round commits")
        r.register(self.endpoints)
        self.heartbeat_gap = Histogram(
            "populace_heartbeat_gap_seconds",
            "Time between a worker's consecutive heartbeats, as the manager saw them.",
            buckets=HEARTBEAT_GAP_BUCKETS_S,
            registry=r,
        )
        self.db_commit = Histogram(
            "populace_db_commit_seconds",
            "Time from a transaction's first statement to its commit (rounds with their "
            "decisions, heartbeat flushes, deploys).",
            buckets=DB_BUCKETS_S,
            registry=r,
        )
        self._deploy_series(r)
        # The round each running simulation last started (a round counts as started once).
        self._playing: dict[int, int] = {}

    def _round_series(self, r: CollectorRegistry) -> None:
        """Rounds and runs: started, finished, how long, their decisions."""
        self.rounds_started = Counter(
            "populace_rounds_started", "Rounds started (a resumed round counts again).", registry=r
        )
        self.rounds_finished = Counter(
            "populace_rounds_finished", "Rounds played and committed.", registry=r
        )
        self.round_seconds = Histogram(
            "populace_round_duration_seconds",
            "Time a committed round took on the workers, fan-out to last aggregate.",
            buckets=ROUND_BUCKETS_S,
            registry=r,
        )
        self.decisions = Counter(
            "populace_decisions",
            "Decisions merged from committed rounds (status: valid, invalid, late, lost).",
            ["status"],
            registry=r,
        )
        self.runs_ended = Counter(
            "populace_runs_ended",
            "Simulation runs that stopped (status: completed, failed, cancelled, paused).",
            ["status"],
            registry=r,
        )

    def _deploy_series(self, r: CollectorRegistry) -> None:
        """Deploys and deletes of populations in progress, and what they moved."""
        self.deploy_agents = Gauge(
            "populace_deploy_agents",
            "Agents of deploys in progress through each stage (sampled, personas, persisted: "
            "rows written, created: on workers).",
            ["population_id", "stage"],
            registry=r,
        )
        self.deploy_target = Gauge(
            "populace_deploy_target_agents",
            "Size of deploys in progress.",
            ["population_id"],
            registry=r,
        )
        self.deploys = Counter(
            "populace_deploys",
            "Deploys that ended (outcome: deployed, failed).",
            ["outcome"],
            registry=r,
        )
        self.agents_deployed = Counter(
            "populace_agents_deployed", "Agents of populations deployed.", registry=r
        )
        self.cleanup_pending = Gauge(
            "populace_cleanup_agents",
            "Agents of populations being deleted (taken off their workers, then their rows).",
            ["population_id"],
            registry=r,
        )
        self.agents_removed = Counter(
            "populace_agents_removed", "Agents taken off workers by population deletes.", registry=r
        )

    # -- what the app wires in -------------------------------------------------------------------

    def watch_engine(self, engine: AsyncEngine) -> None:
        """Time every committed transaction of this app's engine (its own events: no global)."""
        sync = engine.sync_engine

        def began(conn) -> None:
            conn.info[_BEGAN] = time.perf_counter()

        def committed(conn) -> None:
            started = conn.info.pop(_BEGAN, None)
            if started is not None:
                self.db_commit.observe(time.perf_counter() - started)

        def rolled_back(conn) -> None:
            # An invalidated connection (its socket died, or a query was cancelled) keeps no
            # info: asking for it raises PendingRollbackError, which would replace the error
            # being handled (a CancelledError among them). Its record goes away with it.
            if not conn.invalidated:
                conn.info.pop(_BEGAN, None)

        event.listen(sync, "begin", began)
        event.listen(sync, "commit", committed)
        event.listen(sync, "rollback", rolled_back)

    def on_event(self, event: Event) -> None:
        """Every published event (EventHub.observe): counts what rounds and deploys report."""
        if isinstance(event, RoundProgress):
            self._round_progress(event)
        elif isinstance(event, RoundCompleted):
            self._round_completed(event)
        elif isinstance(event, SimulationUpdated):
            if event.status in ENDED:
                self.runs_ended.labels(event.status).inc()
                self._playing.pop(event.simulation_id, None)
        elif isinstance(event, SimulationDeleted):
            self._playing.pop(event.simulation_id, None)
        elif isinstance(event, PopulationProgress):
            self._population_progress(event)

    def _round_progress(self, event: RoundProgress) -> None:
        if self._playing.get(event.simulation_id) != event.round:
            self._playing[event.simulation_id] = event.round
            self.rounds_started.inc()

    def _round_completed(self, event: RoundCompleted) -> None:
        self.rounds_finished.inc()
        self.round_seconds.observe(event.duration_s)
        for status, count in (
            (decision.VALID, event.n_valid),
            (decision.INVALID, event.n_invalid),
            (decision.LATE, event.n_late),
            (decision.LOST, event.n_lost),
        ):
            self.decisions.labels(status).inc(count)
        self.endpoints.add(usage_of_meter(m.model_dump(exclude_none=True)) for m in event.endpoints)

    def _population_progress(self, event: PopulationProgress) -> None:
        population, stage = str(event.population_id), event.stage
        if event.workers_cleaned is not None:  # a delete's last event (deleted, or failed on undo)
            self.agents_removed.inc(event.agents_removed or 0)
            _remove(self.cleanup_pending, population)
        elif stage == population_lifecycle.DELETING:
            self.cleanup_pending.labels(population).set(event.agents or 0)
        elif event.is_deploy_stage:
            self.deploy_agents.labels(population, stage).set(event.done or 0)
            self.deploy_target.labels(population).set(event.total or 0)
        elif (
            stage in (population_lifecycle.DEPLOYED, population_lifecycle.FAILED)
            and event.total is not None
        ):
            self.deploys.labels(stage).inc()
            if stage == population_lifecycle.DEPLOYED:
                self.agents_deployed.inc(event.total)
            for name in DEPLOY_STAGES:
                _remove(self.deploy_agents, population, name)
            _remove(self.deploy_target, population)

    # -- at scrape time --------------------------------------------------------------------------

    async def refresh(self, session: AsyncSession) -> None:
        """Read the store's counts for the gauges (three grouped queries)."""
        view = StoreView(ok=True)
        for state, n, agents, capacity, inflight in await registry.totals_by_state(session):
            live = state in LIVE_STATES
            # An offline worker's last figures are history: it hosts and calls nothing now.
            view.workers[state] = (
                n,
                agents if live else 0,
                capacity if live else 0,
                inflight if live else 0,
            )
        view.populations.update(await population_store.count_by_status(session))
        view.simulations.update(await simulation_store.count_by_status(session))
        self.store.view = view

    def store_unreadable(self) -> None:
        self.store.view = StoreView(ok=False)


def _remove(gauge: Gauge, *labels: str) -> None:
    try:
        gauge.remove(*labels)
    except KeyError:
        pass
