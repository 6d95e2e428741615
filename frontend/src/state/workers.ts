import { parseServerTime } from "../format";
import type { CleanWorkerResult, EventMessage, Worker, WorkerUpdatedEvent, WorkersUpdatedEvent } from "../api/types";
import { LIVE_STATES, PLACING_STATES, REMOVED_STATE } from "../generated/rules";

/** It hosts agents and heartbeats (worker_server/worker_states.py is_live). */
export const isLiveState = (state: string): boolean => LIVE_STATES.some((s) => s === state);
/** It takes new agents, so its capacity counts (worker_states.takes_agents); it can be drained. */
export const takesAgents = (state: string): boolean => PLACING_STATES.some((s) => s === state);
/** Live but taking no new agents: drained, so it can be undrained. */
export const isDrained = (state: string): boolean => isLiveState(state) && !takesAgents(state);
/** Removed for good: nothing more can be done to it. */
export const isRemoved = (state: string): boolean => state === REMOVED_STATE;

/**
 * The live worker table: a snapshot from GET /api/workers kept current by
 * `worker.updated` events (a whole worker, on every change of state) and
 * `workers.updated` events (the stats and beat times of many workers, one event
 * per liveness flush of the manager). Pure, so the replay rules are unit-tested.
 *
 * Events arrive once each and in seq order (the EventStream drops duplicates
 * across reconnections), so this reducer needs no seq bookkeeping of its own.
 *
 * Fetch protocol: the socket opens first, then the list is fetched. Events that
 * arrive while the fetch is in flight are applied at once and also buffered;
 * when the list arrives it becomes the base and the buffer is replayed on top,
 * so an update that raced the fetch is never lost. (Each event carries the whole
 * worker, so replaying one the list already reflects is harmless.)
 *
 * A `preview` (a list fetched at mount, before the socket is open) only fills an empty
 * table, so the page paints without waiting for the websocket handshake; the list fetched
 * after the socket opened replaces it.
 */
export interface WorkersState {
  byId: ReadonlyMap<number, Worker>;
  fetch: { id: number; buffer: EventMessage[] } | null;
  /** The list was cut at the page bound: more workers exist than were fetched. */
  truncated: boolean;
  /** A list has been fetched at least once. */
  loaded: boolean;
}

export type WorkersAction =
  | { type: "events"; events: EventMessage[] }
  | { type: "preview"; workers: Worker[]; truncated: boolean }
  | { type: "fetchStarted"; id: number }
  | { type: "fetchDone"; id: number; workers: Worker[]; truncated: boolean }
  | { type: "fetchFailed"; id: number };

export const initialWorkersState: WorkersState = {
  byId: new Map(),
  fetch: null,
  truncated: false,
  loaded: false,
};

function isWorkerUpdated(event: EventMessage): event is WorkerUpdatedEvent {
  if (event.type !== "worker.updated") return false;
  const worker = (event.payload as { worker?: unknown } | undefined)?.worker;
  return !!worker && typeof worker === "object" && typeof (worker as Worker).id === "number";
}

function isWorkersUpdated(event: EventMessage): event is WorkersUpdatedEvent {
  if (event.type !== "workers.updated") return false;
  return Array.isArray((event.payload as { workers?: unknown } | undefined)?.workers);
}

/** Applies events in order to a worker map; returns the same map when nothing changed. */
export function applyEvents(byId: ReadonlyMap<number, Worker>, events: readonly EventMessage[]): ReadonlyMap<number, Worker> {
  let map: Map<number, Worker> | null = null;
  for (const event of events) {
    if (isWorkerUpdated(event)) {
      map ??= new Map(byId);
      const next = event.payload.worker;
      // Events carry no cadence (only the REST list does): keep the one we know.
      const known = map.get(next.id);
      map.set(next.id, next.ttl_s == null && known?.ttl_s != null ? { ...next, ttl_s: known.ttl_s, heartbeat_interval_s: known.heartbeat_interval_s } : next);
    } else if (isWorkersUpdated(event)) {
      for (const stats of event.payload.workers) {
        if (!stats || typeof stats.id !== "number") continue;
        // Stats of a worker not listed yet wait for its own worker.updated or the next fetch.
        const known = (map ?? byId).get(stats.id);
        if (!known) continue;
        map ??= new Map(byId);
        map.set(stats.id, { ...known, ...stats });
      }
    } // unknown types and malformed events are ignored
  }
  return map ?? byId;
}

export function workersReducer(state: WorkersState, action: WorkersAction): WorkersState {
  switch (action.type) {
    case "events": {
      if (action.events.length === 0) return state;
      const byId = applyEvents(state.byId, action.events);
      const fetch = state.fetch ? { ...state.fetch, buffer: [...state.fetch.buffer, ...action.events] } : null;
      return { ...state, byId, fetch };
    }
    case "preview": {
      if (state.loaded) return state;
      const base = new Map(action.workers.map((w) => [w.id, w] as const));
      return { ...state, byId: applyEvents(base, state.fetch?.buffer ?? []), truncated: action.truncated, loaded: true };
    }
    case "fetchStarted":
      return { ...state, fetch: { id: action.id, buffer: [] } };
    case "fetchDone": {
      if (!state.fetch || state.fetch.id !== action.id) return state; // a newer fetch superseded this one
      const base = new Map(action.workers.map((w) => [w.id, w] as const));
      return { byId: applyEvents(base, state.fetch.buffer), fetch: null, truncated: action.truncated, loaded: true };
    }
    case "fetchFailed":
      if (!state.fetch || state.fetch.id !== action.id) return state;
      return { ...state, fetch: null };
  }
}

export function sortedWorkers(byId: ReadonlyMap<number, Worker>): Worker[] {
  return [...byId.values()].sort((a, b) => a.id - b.id);
}

/** The Cluster page shows this many workers at once: the browser lays out 100 rows, not 1,000. */
export const WORKERS_PER_PAGE = 100;

/** The rows [start, end) of the page holding `firstRow`, kept in range as the fleet shrinks. */
export function pageOf(total: number, firstRow: number): { start: number; end: number } {
  const lastStart = Math.max(0, Math.floor((total - 1) / WORKERS_PER_PAGE) * WORKERS_PER_PAGE);
  const start = Math.min(Math.max(0, Math.floor(firstRow / WORKERS_PER_PAGE) * WORKERS_PER_PAGE), lastStart);
  return { start, end: Math.min(total, start + WORKERS_PER_PAGE) };
}

export interface ClusterTotals {
  workers: number;
  online: number;
  agents: number;
  capacity: number;
}

/** Agents count the workers that host agents now (online and draining); capacity only those
 * that take new ones (online: a draining worker takes none). */
export function clusterTotals(workers: Iterable<Worker>): ClusterTotals {
  const totals: ClusterTotals = { workers: 0, online: 0, agents: 0, capacity: 0 };
  for (const w of workers) {
    if (w.state === "removed") continue;
    totals.workers += 1;
    if (w.state === "online") totals.online += 1;
    if (isLiveState(w.state)) totals.agents += w.agents;
    if (takesAgents(w.state)) totals.capacity += w.capacity;
  }
  return totals;
}

/** "Worker 3: 500 agents removed, 100 moved to other workers, 400 found no room (population 1: 500 removed, 100 moved, 400 without room)." */
export function describeCleanup(result: CleanWorkerResult): string {
  const n = (x: number) => x.toLocaleString("en-US");
  const removed = result.populations.reduce((sum, p) => sum + p.agents, 0);
  const parts = [`Worker ${result.worker_id}: ${n(removed)} agents removed`, `${n(result.agents_moved)} moved to other workers`];
  if (result.agents_unplaced > 0) parts.push(`${n(result.agents_unplaced)} found no room (their population is degraded until a repair)`);
  const populations = result.populations.map(
    (p) => `population ${p.population_id}: ${n(p.agents)} removed, ${n(p.moved)} moved${p.unplaced ? `, ${n(p.unplaced)} without room` : ""}`,
  );
  return `${parts.join(", ")}${populations.length ? ` (${populations.join("; ")})` : " (it hosted none)"}.`;
}

/** The fleet's cadence as the REST list last gave it (all workers share one), or null. */
export function fleetCadence(workers: Iterable<Worker>): { ttl_s: number; heartbeat_interval_s: number | null } | null {
  for (const w of workers) if (typeof w.ttl_s === "number" && w.ttl_s > 0) return { ttl_s: w.ttl_s, heartbeat_interval_s: w.heartbeat_interval_s ?? null };
  return null;
}

/**
 * A live worker whose last heartbeat is older than its TTL: the manager has not marked it
 * offline yet, but "online, 7 s ago" would be wrong. The browser hears beat times only at the
 * manager's liveness flushes, so one heartbeat interval of slack keeps a healthy worker from
 * flickering late between two flushes. No TTL known yet: never late.
 */
export function isLate(worker: Worker, nowMs: number, fleet: { ttl_s: number | null; heartbeat_interval_s?: number | null } | null = null): boolean {
  const ttl = worker.ttl_s ?? fleet?.ttl_s ?? null;
  if (ttl === null || !isLiveState(worker.state)) return false;
  const slack = worker.heartbeat_interval_s ?? fleet?.heartbeat_interval_s ?? 0;
  const beat = parseServerTime(worker.last_heartbeat);
  return !Number.isNaN(beat) && nowMs - beat > (ttl + slack) * 1000;
}
