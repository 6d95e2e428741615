// Types of the manager's REST and websocket API (see shared/contracts/skeleton.md).

export const WORKER_STATES = ["online", "offline", "draining", "removed"] as const;
export type WorkerState = (typeof WORKER_STATES)[number];

export interface Worker {
  id: number;
  node: string;
  /** The process's index on its node: (node, slot) is the worker's identity across restarts. */
  slot: number | null;
  address: string;
  pid: number;
  state: WorkerState;
  agents: number;
  capacity: number;
  cpu_percent: number;
  rss_bytes: number;
  inflight_llm_calls: number;
  version: string;
  /** Its node's labels (`populace worker --labels`), matched by a population's node_selector. */
  labels?: Record<string, string>;
  registered_at: string;
  last_heartbeat: string;
  /** The fleet's heartbeat cadence (GET /api/workers; null in events): silent past ttl_s is late. */
  heartbeat_interval_s?: number | null;
  ttl_s?: number | null;
}

export interface WorkerPage {
  items: Worker[];
  next_after: number | null;
}

export interface ApiInfo {
  version: string;
  database: string;
  heartbeat_interval_s: number;
  worker_ttl_s: number;
  /** What the caller's token may do: everything, or only read (the viewer token). */
  role?: "operator" | "viewer";
}

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
export const POPULATION_STATUSES = ["deploying", "deployed", "degraded", "failed", "deleting", "deleted"] as const;
export type PopulationStatus = (typeof POPULATION_STATUSES)[number];

export interface Population {
  id: number;
  name: string;
  size: number;
  /** Agents a live worker hosts: `size` when deployed, fewer when degraded. */
  hosted: number;
  /** A 64-bit integer as a decimal string: JavaScript numbers cannot hold it. */
  seed: string;
  status: PopulationStatus;
  /** Agents per category, per distribution (set once deployed). */
  counts: Record<string, Record<string, number>> | null;
  error: string | null;
  created_at: string;
  updated_at: string;
}

export interface PopulationDetail extends Population {
  config: Record<string, unknown>;
  /** Worker id (as a string; "None" or "null" for agents placed on no worker) -> agents of this population on it. */
  agents_per_worker: Record<string, number>;
}

export interface PopulationPage {
  items: Population[];
  next_after: number | null;
}

export interface Agent {
  id: number;
  population_id: number;
  worker_id: number | null;
  attributes: Record<string, string | number>;
  persona: string;
  orphaned: boolean;
}

export interface AgentPage {
  items: Agent[];
  next_after: number | null;
}

export interface AgentFilters {
  population_id?: number;
  worker_id?: number;
  /** name:value, e.g. education:doctorate */
  attribute?: string;
}

/** DELETE /api/workers/{id}/agents: the worker's agents move to other workers; those that fit nowhere stay unplaced. */
export interface CleanWorkerResult {
  worker_id: number;
  populations: Array<{ population_id: number; agents: number; moved: number; unplaced: number }>;
  agents_moved: number;
  agents_unplaced: number;
}

/** One entry of FastAPI's 422 `detail` list. */
export interface ValidationIssue {
  loc: Array<string | number>;
  msg: string;
  type?: string;
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

export const SIMULATION_STATUSES = ["pending", "running", "paused", "completed", "failed", "cancelled"] as const;
export type SimulationStatus = (typeof SIMULATION_STATUSES)[number];

export interface Simulation {
  id: number;
  population_id: number;
  name: string;
  status: SimulationStatus;
  rounds: number;
  current_round: number;
  /** A 64-bit integer as a decimal string: JavaScript numbers cannot hold it. */
  seed: string;
  error: string | null;
  stop_reason: string | null;
  /** Why it is paused: an operator, a dead LLM endpoint, agents not hosted in time. */
  pause_reason: string | null;
  /** Agents counted lost over all kept rounds (only with allow_partial). */
  lost_agents: number;
  /** Why an operator cancelled it (free text they gave). */
  cancel_reason?: string | null;
  sweep_id?: number | null;
  sweep_params?: Record<string, unknown> | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
}

/** The stored config as the manager validated it (see backend/simulations/config.py). */
export interface StoredSimulationConfig {
  rule: { preset: string | null; ratio: number | null; offset: number | null; min: number; max: number };
  policy: { kind: string } & Record<string, unknown>;
  prompt?: { system: string; user: string };
  segment_by?: string[];
  histogram_bins?: number;
  /** Rounds complete over the hosted agents; those no live worker hosts count as lost. */
  allow_partial?: boolean;
  [key: string]: unknown;
}

/** One LLM endpoint's meters: per round (rounds[].endpoints), per run (meters), or live (round.progress). */
export interface EndpointMeter {
  base_url: string;
  model: string;
  requests: number;
  errors: number;
  /** Requests not sent (the endpoint's circuit breaker was open). */
  skipped: number;
  late: number;
  prompt_tokens: number;
  completion_tokens: number;
  latency_p50_s: number | null;
  latency_p95_s: number | null;
  requests_per_s: number | null;
  cost_usd: number | null;
  /** Of prompt_tokens, those taken from the server's prefix cache. */
  cached_tokens?: number;
  latency_mean_s?: number | null;
  /** The endpoint's last error message ("" when none). */
  last_error?: string;
}

/** Where a run played: the reproducibility record beyond config and seed ({} for old runs). */
export interface RunRecord {
  populace_version?: string;
  placement?: Array<{ worker_id: number; node: string; address: string; agents: number }>;
  /** Each endpoint's model ids as its /v1/models listed them when the run started. */
  endpoints?: Array<{ base_url: string; model: string; served_models: string[] }>;
  /** The simulation this one re-runs (same population, config and seed). */
  rerun_of?: number | null;
}

export interface SimulationDetail extends Simulation {
  config: StoredSimulationConfig;
  /** The run's meters summed per endpoint (absent from managers before the workbench). */
  meters?: EndpointMeter[];
  cost_usd?: number | null;
  record?: RunRecord;
  models: string[];
  version: string;
  prompt_tokens: number;
  /** Of prompt_tokens, those the LLM servers took from their prefix cache (0: none, or not reported). */
  cached_prompt_tokens: number;
  completion_tokens: number;
  /** How agents with identical prompts were answered; null without an LLM. */
  llm_mode?: "per_agent" | "shared" | "exchangeable" | null;
}

export interface SimulationPage {
  items: Simulation[];
  next_after: number | null;
}

/** Per attribute, per category: {count, mean, std}. */
export type SegmentStats = Record<string, Record<string, { count: number; mean: number | null; std: number | null }>>;

/** One round's statistics: GET .../rounds items and the `round.completed` payload alike. */
export interface SimulationRound {
  round: number;
  n_valid: number;
  n_invalid: number;
  n_late: number;
  /** Agents no live worker hosted for the round (only with allow_partial). */
  n_lost: number;
  mean: number | null;
  median: number | null;
  std: number | null;
  min: number | null;
  max: number | null;
  target: number | null;
  winner_value: number | null;
  winner_count: number;
  winner_agents: number[];
  histogram: number[];
  segments: SegmentStats;
  prompt_tokens: number;
  /** Of prompt_tokens, those the LLM servers took from their prefix cache (0: none, or not reported). */
  cached_prompt_tokens: number;
  completion_tokens: number;
  llm_errors: number;
  llm_requests: number;
  duration_s: number;
  /** When the round was committed (its start is this minus duration_s), if the manager sends it. */
  finished_at?: string;
  /** The round's LLM meters per endpoint ([] without an LLM). */
  endpoints?: EndpointMeter[];
}

export interface RoundPage {
  items: SimulationRound[];
  next_after: number | null;
}

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
}

/** GET /api/agents/{id}/decisions items. */
export interface AgentDecision {
  simulation_id: number;
  simulation_name: string;
  simulation_status: SimulationStatus;
  round: number;
  value: number | null;
  status: "valid" | "invalid" | "late" | "lost";
  target: number | null;
  winner_value: number | null;
  won: boolean;
}

export interface AgentDecisionPage {
  items: AgentDecision[];
  /** "simulation:round" to pass as `after`; null on the last page. */
  next_after: string | null;
}

export type ExportFormat = "csv" | "jsonl";

export const TRANSCRIPT_STATUSES = ["valid", "invalid", "late", "lost"] as const;
export type TranscriptStatus = (typeof TRANSCRIPT_STATUSES)[number];

/** One agent's answer in one round with the exact prompt it was sent (rebuilt by the manager). */
export interface Transcript {
  agent_id: number;
  round: number;
  status: TranscriptStatus;
  value: number | null;
  /** The prompt as sent (chat: its system and user messages joined); null without an LLM. */
  prompt: string | null;
  system?: string | null;
  user?: string | null;
  /** The raw answer, kept only when the run had store_responses on. */
  response: string | null;
  /** Why the answer was invalid or late. */
  reason: string | null;
  attributes: Record<string, string | number>;
}

export interface TranscriptPage {
  items: Transcript[];
  /** The last agent id (a simulation's pages) or round (an agent's pages) of this page. */
  next_after: number | null;
}
