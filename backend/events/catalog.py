"""Every event the manager publishes: its name, its topic and its payload, as one model each.

A publisher builds an event (`RoundCompleted(simulation_id=..., ...)`) and hands it to
`EventHub.publish`; the hub sends `{type, topic, seq, ts, payload}` where `type` is the event's
`event_type`, `topic` comes from its ids and `payload` is the model as JSON. Consumers read
events back with `parse` (the run timeline, the sweep driver, the CLI) or get the objects
themselves (metrics, via `EventHub.observe`). The dashboard's types are generated from these models
(scripts/gen_event_types.py -> frontend/src/api/events.gen.ts).

Models reject unknown fields, so a payload cannot grow a key the types do not know.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from backend.db.models import SWEEP_MODES
from backend.lifecycles import deploy, population
from backend.lifecycles.deploy import DEPLOY_STAGE_SPANS as DEPLOY_STAGE_SPANS
from backend.lifecycles.deploy import DEPLOY_STAGES as DEPLOY_STAGES
from backend.lifecycles.deploy import DeployStage as DeployStage
from backend.lifecycles.deploy import deploy_percent as deploy_percent
from backend.lifecycles.population import PopulationStatus
from backend.lifecycles.simulation import SimulationStatus
from backend.lifecycles.sweep import SweepStatus
from backend.simulations.schemas import EndpointMeter, RoundStatistics, TimelineKind
from backend.workers.schemas import WorkerOut

# -- topics ------------------------------------------------------------------------------------

CLUSTER = "cluster"
# Messages of the socket itself (hello, ping, resync): no event, no replay.
SYSTEM = "system"


def population_topic(population_id: int) -> str:
    return f"population:{population_id}"


def simulation_topic(simulation_id: int) -> str:
    return f"simulation:{simulation_id}"


def sweep_topic(sweep_id: int) -> str:
    return f"sweep:{sweep_id}"


# -- deploy stages -----------------------------------------------------------------------------

# The deploy's stages and their spans of the progress bar: backend.lifecycles.deploy.

# Every stage `population.progress` names: a deploy's (the above, the graph's steps, and how it
# ended), a delete's, emptying a worker, and the placement keeper's repairs.
PopulationStage = Literal[
    DeployStage,
    deploy.GRAPH,
    deploy.GRAPH_SAVED,
    population.DEPLOYED,
    population.FAILED,
    population.DELETING,
    population.DELETED,
    "worker_cleaned",
    "restored",
    "replacing",
    "repaired",
]


# -- the events ----------------------------------------------------------------------------------


class Event(BaseModel):
    """An event's payload; its class names the event, its ids say the topic."""

    model_config = ConfigDict(extra="forbid")

    # The envelope's `type`, and the kind of topic it goes out on (cluster, population, ...).
    event_type: ClassVar[str]
    topic_kind: ClassVar[str]
    # A sparse event leaves out the optional fields its publisher did not set (a progress
    # event says what its stage knows); the others always carry every field.
    sparse: ClassVar[bool] = False

    @property
    def topic(self) -> str:
        raise NotImplementedError

    def payload(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_unset=self.sparse)


class _SimulationEvent(Event):
    topic_kind: ClassVar[str] = "simulation"
    simulation_id: int

    @property
    def topic(self) -> str:
        return simulation_topic(self.simulation_id)


class _SweepEvent(Event):
    topic_kind: ClassVar[str] = "sweep"
    sweep_id: int

    @property
    def topic(self) -> str:
        return sweep_topic(self.sweep_id)


class _ClusterEvent(Event):
    topic_kind: ClassVar[str] = CLUSTER

    @property
    def topic(self) -> str:
        return CLUSTER


class WorkerStats(BaseModel):
    """What a heartbeat changes of a worker (backend.workers.schemas.STATS_FIELDS)."""

    model_config = ConfigDict(extra="forbid")

    id: int
    agents: int
    capacity: int
    cpu_percent: float
    rss_bytes: int
    inflight_llm_calls: int
    last_heartbeat: str


class WorkersUpdated(_ClusterEvent):
    """Heartbeat stats, a batch of workers per liveness flush."""

    event_type: ClassVar[str] = "workers.updated"
    workers: list[WorkerStats]


class WorkerUpdated(_ClusterEvent):
    """A worker row changed (registered, drained, offline, removed)."""

    event_type: ClassVar[str] = "worker.updated"
    worker: WorkerOut


class PopulationProgress(Event):
    """A deploy, a delete, a worker emptied or a repair, as it goes (`stage` says which)."""

    event_type: ClassVar[str] = "population.progress"
    topic_kind: ClassVar[str] = "population"
    sparse: ClassVar[bool] = True

    population_id: int
    stage: PopulationStage
    # Agents through the stage, of how many.
    done: int | None = None
    total: int | None = None
    error: str | None = None
    # personas: LLM personas that fell back to the template.
    failures: int | None = None
    timings: dict[str, float] | None = None
    # deleting, worker_cleaned: the agents concerned.
    agents: int | None = None
    # deleted (or failed, undoing a deploy): how the workers were cleaned.
    workers_cleaned: int | None = None
    workers_orphaned: int | None = None
    agents_removed: int | None = None
    # worker_cleaned, restored: the worker.
    worker_id: int | None = None
    moved: int | None = None
    unplaced: int | None = None
    # repaired: the placement keeper's report.
    size: int | None = None
    hosted: int | None = None
    restored: int | None = None
    replaced: int | None = None
    status: PopulationStatus | None = None

    @property
    def topic(self) -> str:
        return population_topic(self.population_id)

    @property
    def is_deploy_stage(self) -> bool:
        return self.stage in DEPLOY_STAGE_SPANS


class SimulationUpdated(_SimulationEvent):
    """The run's row changed: status, reasons, current round."""

    event_type: ClassVar[str] = "simulation.updated"
    population_id: int
    status: SimulationStatus
    rounds: int
    current_round: int
    error: str | None
    stop_reason: str | None
    pause_reason: str | None
    cancel_reason: str | None
    lost_agents: int
    rounds_below_floor: int
    started_at: str | None
    finished_at: str | None


class LlmMeter(EndpointMeter):
    """An endpoint's meter as a round's events carry it: the API's, with the raw latency buckets
    (so the metrics add rounds up) and the time it was measured over."""

    model_config = ConfigDict(extra="forbid")

    latency_counts: list[int] | None = None
    latency_sum_s: float | None = None
    duration_s: float | None = None


class RoundProgress(_SimulationEvent):
    """Answers so far in the round being played (at most 10 a second per run)."""

    event_type: ClassVar[str] = "round.progress"
    sparse: ClassVar[bool] = True
    round: int
    rounds: int
    answered: int
    total: int
    # Only with LLM endpoints; without the raw latency buckets.
    endpoints: list[LlmMeter] | None = None


class RoundCompleted(_SimulationEvent, RoundStatistics):
    """A round stored: its statistics, as GET .../rounds shows them."""

    event_type: ClassVar[str] = "round.completed"
    rounds: int
    endpoints: list[LlmMeter]
    participation: float | None
    parse_failure_rate: float | None


class SimulationFault(_SimulationEvent):
    """Something went wrong in a round that the run survives (a worker lost, a retry)."""

    event_type: ClassVar[str] = "simulation.fault"
    round: int
    message: str


class SimulationRestarted(_SimulationEvent):
    """The manager's start-up resumed the run after its last kept round (its status stayed
    `running`, so no `simulation.updated` says it)."""

    event_type: ClassVar[str] = "simulation.restarted"
    round: int


class TimelineAdded(_SimulationEvent):
    """An entry stored on the run's timeline, as GET .../timeline shows it."""

    event_type: ClassVar[str] = "timeline.added"
    id: int
    kind: TimelineKind
    round: int | None
    message: str
    data: dict[str, Any]
    time: str


class SimulationDeleted(_SimulationEvent):
    event_type: ClassVar[str] = "simulation.deleted"


class SweepUpdated(_SweepEvent):
    """The sweep's row changed."""

    event_type: ClassVar[str] = "sweep.updated"
    name: str
    status: SweepStatus
    mode: Literal[SWEEP_MODES]  # type: ignore[valid-type]
    runs: int
    error: str | None


class SweepRun(_SweepEvent):
    """One run of the sweep changed (forwarded from its `simulation.updated`)."""

    event_type: ClassVar[str] = "sweep.run"
    # The grid point, from 1.
    point: int | None
    simulation_id: int
    population_id: int
    status: SimulationStatus
    current_round: int
    rounds: int


class SweepDeleted(_SweepEvent):
    event_type: ClassVar[str] = "sweep.deleted"


EVENTS: tuple[type[Event], ...] = (
    WorkersUpdated,
    WorkerUpdated,
    PopulationProgress,
    SimulationUpdated,
    RoundProgress,
    RoundCompleted,
    SimulationFault,
    SimulationRestarted,
    TimelineAdded,
    SimulationDeleted,
    SweepUpdated,
    SweepRun,
    SweepDeleted,
)
BY_TYPE: dict[str, type[Event]] = {event.event_type: event for event in EVENTS}


# -- reading events back ---------------------------------------------------------------------


class Published(BaseModel):
    """One message of the event stream, its payload as its event's model."""

    type: str
    topic: str
    seq: int
    ts: str
    payload: Event


def parse(
    message: str | bytes | dict[str, Any], only: tuple[type[Event], ...] = EVENTS
) -> Published | None:
    """A message from the hub or the websocket, typed; None for what is no event (the socket's
    hello, ping and resync), an event this version does not know, or one not in `only` (left
    unvalidated: a follower of many topics reads few of their events)."""
    raw = json.loads(message) if isinstance(message, (str, bytes)) else message
    model = BY_TYPE.get(raw.get("type")) if isinstance(raw, dict) else None
    if model is None or model not in only:
        return None
    try:
        return Published(
            type=raw["type"],
            topic=raw["topic"],
            seq=raw["seq"],
            ts=raw["ts"],
            payload=model.model_validate(raw.get("payload") or {}),
        )
    except (KeyError, ValidationError):
        return None


# -- the socket's own messages (topic `system`, no event) ----------------------------------


class Hello(BaseModel):
    """The first message on a socket: where the stream stands, and what was replayed."""

    topics: list[str]
    epoch: str
    ping_interval_s: float
    # Only on a reconnection (`since` given): the seq asked from, and how many events were
    # replayed (null: none could be, a resync follows).
    since: int | None = None
    replayed: int | None = None


class Resync(BaseModel):
    """The missed events are gone (or the manager restarted): refetch the snapshot."""

    since: int
    oldest_buffered_seq: int | None
    reason: str


SYSTEM_MESSAGES: dict[str, type[BaseModel] | None] = {
    "hello": Hello,
    "resync": Resync,
    "ping": None,
}


def system_message(type_: str, seq: int | None = None, payload: BaseModel | None = None) -> str:
    """A `system` message as the socket sends it (a ping has neither seq nor payload)."""
    message: dict[str, Any] = {"type": type_, "topic": SYSTEM}
    if seq is not None:
        message["seq"] = seq
    if payload is not None:
        message["payload"] = payload.model_dump(mode="json", exclude_unset=True)
    return json.dumps(message)
