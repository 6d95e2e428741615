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
