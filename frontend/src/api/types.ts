// Types of the manager's REST and websocket API. The REST models come from the generated
// schema.d.ts (`make api-types`, from the manager's OpenAPI); some fields are narrowed here
// to what the dashboard relies on (a status the backend types as str, free-form JSON). Events,
// filters and other frontend-only shapes are written by hand below.
import { DECISION_STATUSES, type POPULATION_STATUSES, type SIMULATION_STATUSES, type WORKER_STATES } from "../generated/rules";
import type { components } from "./schema";

/** The manager's models, by the names its OpenAPI gives them. */
type Schemas = components["schemas"];
/** A generated model with some fields replaced by narrower (or hand-described) types. */
type Refine<T, U> = Omit<T, keyof U> & U;
/** Fields that older managers, or the same object in an event, may leave out. */
type Loose<T, K extends keyof T> = Omit<T, K> & Partial<Pick<T, K>>;
/** A generated page of `T`s ({items, next_after}). */
type PageOf<P extends { items: unknown[] }, T> = Refine<P, { items: T[] }>;

// The states are worker_server/worker_states.py's, generated into rules.ts (make rules).
export { WORKER_STATES } from "../generated/rules";
export type WorkerState = (typeof WORKER_STATES)[number];

/** `heartbeat_interval_s` and `ttl_s` come with GET /api/workers, not in events. */
export type Worker = Loose<Schemas["WorkerOut"], "labels" | "plugins" | "heartbeat_interval_s" | "ttl_s">;

export type WorkerPage = PageOf<Schemas["WorkerPage"], Worker>;

/** One bucket of a worker's load history (GET /api/workers/{id}/history). */
export type HistoryPoint = Schemas["HistoryPoint"];
export type WorkerHistory = Schemas["WorkerHistoryOut"];
/** The live workers' totals in one bucket (GET /api/cluster/history). */
export type ClusterHistoryPoint = Schemas["ClusterHistoryPoint"];
export type ClusterHistory = Schemas["ClusterHistoryOut"];

export const LOG_LEVELS = ["debug", "info", "warning", "error", "critical"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
export type LogLine = Schemas["LogLineOut"];
/** A worker's recent log lines (GET /api/workers/{id}/logs), asked of its process. */
export type WorkerLogs = Schemas["WorkerLogsOut"];

export type ApiInfo = Loose<Schemas["InfoOut"], "role">;

/** One message from /ws/events. Types we do not know are ignored by consumers. */
export interface EventMessage {
  type: string;
  topic?: string;
  seq?: number;
  ts?: string;
  payload?: Record<string, unknown>;
}

export interface WorkerUpdatedEvent extends EventMessage {
  type: "worker.updated";
  seq: number;
  payload: { worker: Worker };
}

/** What a heartbeat changes: sent for many workers at once (one event per liveness flush). */
export type WorkerStats = Pick<Worker, "id" | "agents" | "capacity" | "cpu_percent" | "rss_bytes" | "inflight_llm_calls" | "last_heartbeat">;

export interface WorkersUpdatedEvent extends EventMessage {
  type: "workers.updated";
  seq: number;
  payload: { workers: WorkerStats[] };
}

/** degraded: deployed, but live workers host fewer agents than its size (`hosted` < `size`). */
// The lifecycles' states are backend/lifecycles/'s, generated into rules.ts (make rules).
export { POPULATION_STATUSES } from "../generated/rules";
export type PopulationStatus = (typeof POPULATION_STATUSES)[number];

export type Population = Refine<Schemas["PopulationOut"], { status: PopulationStatus }>;

export type PopulationDetail = Refine<Schemas["PopulationDetail"], { status: PopulationStatus }>;

export type PopulationPage = PageOf<Schemas["PopulationPage"], Population>;

/** An agent's attributes are its persona's categories and numbers. */
export type Agent = Refine<Schemas["AgentOut"], { attributes: Record<string, string | number> }>;

export type AgentPage = PageOf<Schemas["AgentPage"], Agent>;

export interface AgentFilters {
  population_id?: number;
  worker_id?: number;
  /** name:value, e.g. education:doctorate */
  attribute?: string;
}

/** DELETE /api/workers/{id}/agents: the worker's agents move to other workers; those that fit nowhere stay unplaced. */
export type CleanWorkerResult = Schemas["CleanWorkerOut"];

/** One entry of FastAPI's 422 `detail` list. */
export interface ValidationIssue {
  loc: Array<string | number>;
  msg: string;
  type?: string;
  /** Pydantic's bounds and choices ({le: 1000}, {expected: "'a' or 'b'"}), when the error has them. */
  ctx?: Record<string, unknown>;
}

/** The payload of `population.progress` on topic population:{id}. */
export interface PopulationProgress {
  population_id: number;
  stage: string;
  done?: number;
  total?: number;
  error?: string;
  failures?: number;
  workers_cleaned?: number;
  workers_orphaned?: number;
  worker_id?: number;
  agents?: number;
  /** worker_cleaned: agents moved to other workers, and those no worker had room for. */
  moved?: number;
  unplaced?: number;
  /** repaired: the population after a repair. */
  hosted?: number;
  size?: number;
  status?: PopulationStatus;
  restored?: number;
  replaced?: number;
}

export { SIMULATION_STATUSES } from "../generated/rules";
export type SimulationStatus = (typeof SIMULATION_STATUSES)[number];

export type Simulation = Refine<
  Loose<Schemas["SimulationOut"], "cancel_reason" | "sweep_id">,
  {
    status: SimulationStatus;
    sweep_params?: Record<string, unknown> | null;
    /** Set when the row is stored. */
    created_at: string;
  }
>;

export type StoredRule = { preset: string | null; ratio: number | null; offset: number | null; min: number; max: number };

/** The stored config as the manager validated it (see backend/simulations/config.py). */
export interface StoredSimulationConfig {
  /** The plugin that played and its params (the guessing game's: rule, feedback). */
  plugin?: { name: string; params: Record<string, unknown> };
  /** Configs stored before plugins gave the guessing game's params here: read them with guessParams. */
  rule?: StoredRule;
  feedback?: { mean?: boolean };
  policy: { kind: string } & Record<string, unknown>;
  prompt?: { system: string; user: string };
  segment_by?: string[];
  histogram_bins?: number;
  /** Rounds complete over the hosted agents; those no live worker hosts count as lost. */
  allow_partial?: boolean;
  [key: string]: unknown;
}

/** One LLM endpoint's meters: per round (rounds[].endpoints), per run (meters), or live (round.progress). */
// Older rounds were stored without the newer counters.
export type EndpointMeter = Loose<
  Schemas["EndpointMeter"],
  "cached_tokens" | "latency_mean_s" | "last_error" | "breaker_opened" | "breaker_half_opened" | "breaker_closed"
>;

/** Where a run played: the reproducibility record beyond config and seed ({} for old runs). */
export interface RunRecord {
  populace_version?: string;
  placement?: Array<{ worker_id: number; node: string; address: string; agents: number }>;
  /** Each endpoint's model ids as its /v1/models listed them when the run started. */
  endpoints?: Array<{ base_url: string; model: string; served_models: string[] }>;
  /** The simulation this one re-runs (same population, config and seed). */
  rerun_of?: number | null;
  /** Who plays which policy: each part of the run's policy (one for a plain policy). */
  policies?: PolicyPart[];
}

/** One part of a run's policy as its record lists it (backend/simulations/mixture.py). */
export interface PolicyPart {
  label: string;
  kind: string;
  agents: number;
  /** By share: the part's share of the population. */
  share?: number;
  /** By attribute: the attribute and the categories that play this part ([]: the default). */
  attribute?: string;
  categories?: string[];
}

/** A mixed policy's round, per part label (GET .../rounds `metrics_by_policy`). */
export type PolicyBreakdown = Record<string, { agents: number; n_valid: number; n_invalid: number; n_late: number; n_lost: number; mean: number | null }>;

export type SimulationDetail = Refine<
  Loose<Schemas["SimulationDetail"], "cancel_reason" | "sweep_id" | "meters" | "cost_usd" | "metrics">,
  {
    status: SimulationStatus;
    sweep_params?: Record<string, unknown> | null;
    created_at: string;
    config: StoredSimulationConfig;
    record?: RunRecord;
    /** How agents with identical prompts were answered; null without an LLM. */
    llm_mode?: "per_agent" | "shared" | "exchangeable" | null;
  }
>;

/** A run as GET /api/simulations lists it: with its plugin's params, its sweep's name and its
 * last kept round's metrics (a run an event or another answer gave may have none of them). */
export type SimulationListItem = Simulation &
  Partial<{
    plugin: string | null;
    policy: string | null;
    params: Record<string, unknown>;
    sweep_name: string | null;
    last_metrics: Record<string, number | null>;
  }>;

export type SimulationPage = PageOf<Loose<Schemas["SimulationPage"], "next_cursor">, SimulationListItem>;

export type Plugin = Schemas["PluginOut"];
export type PluginPage = Schemas["PluginPage"];

/** Per attribute, per category: {count, mean, std}. */
export type SegmentStats = Record<string, Record<string, { count: number; mean: number | null; std: number | null }>>;

/** One round's statistics: GET .../rounds items and the `round.completed` payload alike. */
export type SimulationRound = Refine<
  Loose<Schemas["RoundOut"], "finished_at" | "endpoints" | "metrics" | "metrics_by_policy">,
  { segments: SegmentStats; metrics_by_policy?: PolicyBreakdown }
>;

export type RoundPage = PageOf<Schemas["RoundPage"], SimulationRound>;

/** A run's group metrics in one round, a keyset page of groups (GET .../groups). */
export type GroupPage = Schemas["GroupPage"];
export type GroupRow = Schemas["GroupOut"];
/** One group's metrics over the rounds (GET .../groups/{group}). */
export type GroupSeries = Schemas["GroupSeries"];
/** The group metrics export's formats (GET .../groups/export). */
export type GroupExportFormat = "csv" | "jsonl";

/** `round.progress` on topic simulation:{id}, at most 10 a second. */
export interface RoundProgress {
  simulation_id: number;
  round: number;
  rounds: number;
  answered: number;
  total: number;
  /** The round's LLM meters so far, per endpoint (partial; sent by newer managers). */
  endpoints?: EndpointMeter[];
}

/** `simulation.updated` on topic simulation:{id}. */
export interface SimulationUpdate {
  simulation_id: number;
  population_id: number;
  status: SimulationStatus;
  rounds: number;
  current_round: number;
  error: string | null;
  stop_reason: string | null;
  pause_reason: string | null;
  lost_agents: number;
  /** Absent from older managers' events. */
  rounds_below_floor?: number;
  started_at?: string | null;
  finished_at?: string | null;
}

/** GET /api/agents/{id}/decisions items. */
export type AgentDecision = Refine<
  Schemas["AgentDecisionOut"],
  { simulation_status: SimulationStatus; status: TranscriptStatus }
>;

export type AgentDecisionPage = PageOf<Schemas["AgentDecisionPage"], AgentDecision>;

export type ExportFormat = "csv" | "jsonl" | "parquet";

/** A decision's status (how the agent's answer counted in its round). */
export const TRANSCRIPT_STATUSES = DECISION_STATUSES;
export type TranscriptStatus = (typeof DECISION_STATUSES)[number];

/** One agent's answer in one round with the exact prompt it was sent (rebuilt by the manager). */
export type Transcript = Refine<
  Loose<Schemas["TranscriptOut"], "system" | "user">,
  { status: TranscriptStatus; attributes: Record<string, string | number> }
>;

export type TranscriptPage = PageOf<Schemas["TranscriptPage"], Transcript>;

/** What happened to a run (GET /api/simulations/{id}/timeline, and `timeline.added` events). */
export type TimelineEntry = Schemas["TimelineEntryOut"];
export type TimelineKind = TimelineEntry["kind"];
export type TimelinePage = Schemas["TimelinePage"];
