import type { EventMessage, Worker, WorkerUpdatedEvent } from "../api/types";

/**
 * The live worker table: a snapshot from GET /api/workers kept current by
 * `worker.updated` events. Pure, so the seq and replay rules are unit-tested.
 *
 * Fetch protocol: the socket opens first, then the list is fetched. Events that
 * arrive while the fetch is in flight are applied at once and also buffered;
 * when the list arrives it becomes the base and the buffer is replayed on top,
 * so an update that raced the fetch is never lost.
 */
export interface WorkersState {
  byId: ReadonlyMap<number, Worker>;
  /** Highest event seq applied; events at or below it are stale duplicates. */
  lastSeq: number | null;
  fetch: { id: number; seqAtStart: number | null; buffer: EventMessage[] } | null;
  /** The list was cut at the page bound: more workers exist than were fetched. */
  truncated: boolean;
  /** A list has been fetched at least once. */
  loaded: boolean;
}

export type WorkersAction =
  | { type: "events"; events: EventMessage[] }
  | { type: "fetchStarted"; id: number }
  | { type: "fetchDone"; id: number; workers: Worker[]; truncated: boolean }
  | { type: "fetchFailed"; id: number };

export const initialWorkersState: WorkersState = {
  byId: new Map(),
  lastSeq: null,
  fetch: null,
  truncated: false,
  loaded: false,
};

function isWorkerUpdated(event: EventMessage): event is WorkerUpdatedEvent {
  if (event.type !== "worker.updated" || typeof event.seq !== "number") return false;
  const worker = (event.payload as { worker?: unknown } | undefined)?.worker;
  return !!worker && typeof worker === "object" && typeof (worker as Worker).id === "number";
}

/** Applies events in order to a worker map; returns the same objects when nothing changed. */
export function applyEvents(
  byId: ReadonlyMap<number, Worker>,
  lastSeq: number | null,
  events: readonly EventMessage[],
): { byId: ReadonlyMap<number, Worker>; lastSeq: number | null } {
  let map: Map<number, Worker> | null = null;
  let seq = lastSeq;
  for (const event of events) {
    if (event.type === "hello") {
      // A new connection: its seq is the base. A restarted manager starts over
      // from a lower seq, which must not make every later event look stale.
      if (typeof event.seq === "number") seq = event.seq;
      continue;
    }
    if (!isWorkerUpdated(event)) continue; // unknown types and malformed events are ignored
    if (seq !== null && event.seq <= seq) continue;
    seq = event.seq;
    map ??= new Map(byId);
    map.set(event.payload.worker.id, event.payload.worker);
  }
  return { byId: map ?? byId, lastSeq: seq };
}

export function workersReducer(state: WorkersState, action: WorkersAction): WorkersState {
  switch (action.type) {
    case "events": {
      if (action.events.length === 0) return state;
      const applied = applyEvents(state.byId, state.lastSeq, action.events);
      const fetch = state.fetch ? { ...state.fetch, buffer: [...state.fetch.buffer, ...action.events] } : null;
      return { ...state, ...applied, fetch };
    }
    case "fetchStarted":
      return { ...state, fetch: { id: action.id, seqAtStart: state.lastSeq, buffer: [] } };
    case "fetchDone": {
      if (!state.fetch || state.fetch.id !== action.id) return state; // a newer fetch superseded this one
      const base = new Map(action.workers.map((w) => [w.id, w] as const));
      const replayed = applyEvents(base, state.fetch.seqAtStart, state.fetch.buffer);
      return { ...replayed, fetch: null, truncated: action.truncated, loaded: true };
    }
    case "fetchFailed":
      if (!state.fetch || state.fetch.id !== action.id) return state;
      return { ...state, fetch: null };
  }
}

export function sortedWorkers(byId: ReadonlyMap<number, Worker>): Worker[] {
  return [...byId.values()].sort((a, b) => a.id - b.id);
}

export interface ClusterTotals {
  workers: number;
  online: number;
  agents: number;
  capacity: number;
}

/** Agents and capacity count the workers that host agents now: online and draining. */
export function clusterTotals(workers: Iterable<Worker>): ClusterTotals {
  const totals: ClusterTotals = { workers: 0, online: 0, agents: 0, capacity: 0 };
  for (const w of workers) {
    if (w.state === "removed") continue;
    totals.workers += 1;
    if (w.state === "online") totals.online += 1;
    if (w.state === "online" || w.state === "draining") {
      totals.agents += w.agents;
      totals.capacity += w.capacity;
    }
  }
  return totals;
}
