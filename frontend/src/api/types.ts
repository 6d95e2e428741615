// Types of the manager's REST and websocket API (see shared/contracts/skeleton.md).

export const WORKER_STATES = ["online", "offline", "draining", "removed"] as const;
export type WorkerState = (typeof WORKER_STATES)[number];

export interface Worker {
  id: number;
  node: string;
  address: string;
  pid: number;
  state: WorkerState;
  agents: number;
  capacity: number;
  cpu_percent: number;
  rss_bytes: number;
  inflight_llm_calls: number;
  version: string;
  registered_at: string;
  last_heartbeat: string;
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

export const POPULATION_STATUSES = ["deploying", "deployed", "failed", "deleting", "deleted"] as const;
export type PopulationStatus = (typeof POPULATION_STATUSES)[number];

export interface Population {
  id: number;
  name: string;
  size: number;
  seed: number;
  status: PopulationStatus;
  /** Agents per category, per distribution (set once deployed). */
  counts: Record<string, Record<string, number>> | null;
  error: string | null;
  created_at: string;
  updated_at: string;
}

export interface PopulationDetail extends Population {
  config: Record<string, unknown>;
  /** Worker id (as a string; "null" for agents without a worker) -> agents of this population on it. */
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

/** DELETE /api/workers/{id}/agents */
export interface CleanWorkerResult {
  worker_id: number;
  populations: Array<{ population_id: number; agents: number; result: "removed" | "orphaned" }>;
  agents_removed: number;
  agents_orphaned: number;
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
}
