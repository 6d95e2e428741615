import { describe, expect, it } from "vitest";
import type { EventMessage, Worker } from "../api/types";
import { WORKERS_PER_PAGE, applyEvents, clusterTotals, describeCleanup, fleetCadence, initialWorkersState, isDrained, isLate, isLiveState, isRemoved, pageOf, sortedWorkers, takesAgents, workersReducer } from "./workers";

function worker(id: number, overrides: Partial<Worker> = {}): Worker {
  return {
    id,
    node: "node-a",
    slot: id - 1,
    address: `127.0.0.1:${50050 + id}`,
    pid: 1000 + id,
    state: "online",
    agents: 0,
    capacity: 100,
    cpu_percent: 1.5,
    rss_bytes: 50 * 1024 * 1024,
    inflight_llm_calls: 0,
    version: "0.1.0",
    tls: false,
    registered_at: "2025-01-01T00:00:00Z",
    last_heartbeat: "2025-01-01T00:00:01Z",
    ...overrides,
  };
}

function updated(seq: number, w: Worker): EventMessage {
  return { type: "worker.updated", topic: "cluster", seq, ts: "2025-01-01T00:00:02Z", payload: { worker: w } };
}

describe("applyEvents", () => {
  it("upserts workers by id", () => {
    const base = new Map([[1, worker(1)]]);
    const byId = applyEvents(base, [updated(5, worker(1, { agents: 7 })), updated(6, worker(2))]);
    expect(byId.get(1)?.agents).toBe(7);
    expect(byId.get(2)?.address).toBe("127.0.0.1:50052");
    expect(byId.size).toBe(2);
    expect(base.get(1)?.agents).toBe(0); // input untouched
  });

  it("merges a batch of stats into the workers it names, keeping their state", () => {
    const base = new Map([
      [1, worker(1, { state: "draining" })],
      [2, worker(2)],
    ]);
    const batch: EventMessage = {
      type: "workers.updated",
      seq: 7,
      payload: {
        workers: [
          { id: 1, agents: 40, capacity: 90, cpu_percent: 55, rss_bytes: 1, inflight_llm_calls: 3, last_heartbeat: "2025-01-01T00:00:09Z" },
          { id: 3, agents: 5, capacity: 9, cpu_percent: 1, rss_bytes: 1, inflight_llm_calls: 0, last_heartbeat: "2025-01-01T00:00:09Z" },
        ],
      },
    };
    const byId = applyEvents(base, [batch]);
    expect(byId.get(1)).toMatchObject({ state: "draining", agents: 40, inflight_llm_calls: 3, address: "127.0.0.1:50051" });
    expect(byId.get(2)).toBe(base.get(2));
    expect(byId.has(3)).toBe(false); // not listed yet: its own worker.updated or the next fetch brings it
    expect(applyEvents(base, [{ type: "workers.updated", seq: 8, payload: { workers: [{ id: 3 }] } }])).toBe(base);
  });

  it("ignores unknown and malformed events and keeps the same map", () => {
    const base = new Map<number, Worker>();
    const events: EventMessage[] = [
      { type: "ping", seq: 4 },
      { type: "population.progress", seq: 5, payload: { worker: worker(9) } },
      { type: "worker.updated", seq: 6, payload: {} },
      { type: "workers.updated", seq: 7, payload: { workers: "nope" } },
    ];
    expect(applyEvents(base, events)).toBe(base);
  });
});

describe("workersReducer fetch protocol", () => {
  it("replays events received during the fetch on top of the fetched list", () => {
    let state = workersReducer(initialWorkersState, { type: "fetchStarted", id: 1 });
    // The worker goes offline while the list request is in flight...
    state = workersReducer(state, { type: "events", events: [updated(21, worker(1, { state: "offline" }))] });
    expect(state.byId.get(1)?.state).toBe("offline");
    // ...and the list was read before that, so it still says online.
    state = workersReducer(state, {
      type: "fetchDone",
      id: 1,
      workers: [worker(1), worker(2)],
      truncated: false,
    });
    expect(state.byId.get(1)?.state).toBe("offline");
    expect(state.byId.get(2)?.state).toBe("online");
    expect(state.loaded).toBe(true);
    expect(state.fetch).toBeNull();
  });

  it("drops workers the fresh list no longer has and ignores a superseded fetch", () => {
    let state = workersReducer(initialWorkersState, { type: "events", events: [updated(1, worker(5))] });
    state = workersReducer(state, { type: "fetchStarted", id: 1 });
    state = workersReducer(state, { type: "fetchStarted", id: 2 });
    const afterStale = workersReducer(state, { type: "fetchDone", id: 1, workers: [worker(6)], truncated: true });
    expect(afterStale).toBe(state);
    state = workersReducer(state, { type: "fetchDone", id: 2, workers: [worker(7)], truncated: true });
    expect([...state.byId.keys()]).toEqual([7]);
    expect(state.truncated).toBe(true);
  });

  it("paints a preview list at once, but the list fetched after the socket opened wins", () => {
    let state = workersReducer(initialWorkersState, { type: "preview", workers: [worker(1), worker(2)], truncated: false });
    expect([...state.byId.keys()]).toEqual([1, 2]);
    expect(state.loaded).toBe(true);
    state = workersReducer(state, { type: "fetchStarted", id: 1 });
    state = workersReducer(state, { type: "fetchDone", id: 1, workers: [worker(2)], truncated: false });
    expect([...state.byId.keys()]).toEqual([2]);
    // A preview slower than the real list changes nothing.
    expect(workersReducer(state, { type: "preview", workers: [worker(9)], truncated: false })).toBe(state);
  });

  it("accepts events of a restarted manager, whose seqs start over lower", () => {
    let state = workersReducer(initialWorkersState, { type: "events", events: [updated(900, worker(1))] });
    state = workersReducer(state, { type: "fetchStarted", id: 1 });
    state = workersReducer(state, { type: "fetchDone", id: 1, workers: [worker(1)], truncated: false });
    state = workersReducer(state, { type: "events", events: [updated(3, worker(1, { state: "draining" }))] });
    expect(state.byId.get(1)?.state).toBe("draining");
  });
});

describe("totals and ordering", () => {
  it("counts online workers, agents on online and draining workers, and capacity that takes new agents", () => {
    const totals = clusterTotals([
      worker(1, { agents: 10, capacity: 100 }),
      worker(2, { state: "draining", agents: 5, capacity: 50 }),
      worker(3, { state: "offline", agents: 99, capacity: 100 }),
      worker(4, { state: "removed", agents: 1, capacity: 1 }),
    ]);
    expect(totals).toEqual({ workers: 3, online: 1, agents: 15, capacity: 100 });
  });

  it("sorts by id", () => {
    const map = new Map([
      [3, worker(3)],
      [1, worker(1)],
      [2, worker(2)],
    ]);
    expect(sortedWorkers(map).map((w) => w.id)).toEqual([1, 2, 3]);
  });
});

describe("pageOf", () => {
  it("pages a large fleet and stays in range when it shrinks", () => {
    expect(WORKERS_PER_PAGE).toBe(100);
    expect(pageOf(0, 0)).toEqual({ start: 0, end: 0 });
    expect(pageOf(1000, 0)).toEqual({ start: 0, end: 100 });
    expect(pageOf(1000, 950)).toEqual({ start: 900, end: 1000 });
    expect(pageOf(250, 200)).toEqual({ start: 200, end: 250 });
    expect(pageOf(150, 200)).toEqual({ start: 100, end: 150 }); // the last page went away
    expect(pageOf(150, -100)).toEqual({ start: 0, end: 100 });
  });
});

describe("describeCleanup", () => {
  it("says how many agents moved and how many found no room, per population", () => {
    expect(
      describeCleanup({
        worker_id: 3,
        populations: [{ population_id: 1, agents: 500, moved: 100, unplaced: 400 }],
        agents_moved: 100,
        agents_unplaced: 400,
      }),
    ).toBe(
      "Worker 3: 500 agents removed, 100 moved to other workers, 400 found no room (their population is degraded until a repair) " +
        "(population 1: 500 removed, 100 moved, 400 without room).",
    );
    expect(describeCleanup({ worker_id: 2, populations: [], agents_moved: 0, agents_unplaced: 0 })).toBe(
      "Worker 2: 0 agents removed, 0 moved to other workers (it hosted none).",
    );
  });
});

describe("late workers", () => {
  const beat = "2025-01-01T00:00:10Z";
  const at = (seconds: number) => Date.parse("2025-01-01T00:00:00Z") + seconds * 1000;

  it("is late once its last beat is older than the TTL (plus one interval of flush slack)", () => {
    const w = worker(1, { last_heartbeat: beat, ttl_s: 3, heartbeat_interval_s: 1 });
    expect(isLate(w, at(13))).toBe(false);
    expect(isLate(w, at(14.5))).toBe(true);
    expect(isLate({ ...w, state: "draining" }, at(20))).toBe(true);
    expect(isLate({ ...w, state: "offline" }, at(20))).toBe(false); // the manager already said so
  });

  it("uses the fleet's cadence for a worker known only from events, and never guesses without one", () => {
    const w = worker(2, { last_heartbeat: beat });
    expect(isLate(w, at(100))).toBe(false);
    expect(isLate(w, at(100), { ttl_s: 50, heartbeat_interval_s: 16 })).toBe(true);
    expect(isLate(w, at(70), { ttl_s: 50, heartbeat_interval_s: 16 })).toBe(false);
    expect(fleetCadence([worker(3), worker(4, { ttl_s: 3, heartbeat_interval_s: 1 })])).toEqual({ ttl_s: 3, heartbeat_interval_s: 1 });
    expect(fleetCadence([worker(3)])).toBeNull();
  });

  it("keeps the cadence the list gave when a worker.updated event (which has none) replaces the worker", () => {
    const base = new Map([[1, worker(1, { ttl_s: 3, heartbeat_interval_s: 1 })]]);
    const byId = applyEvents(base, [updated(9, worker(1, { state: "draining", ttl_s: null }))]);
    expect(byId.get(1)).toMatchObject({ state: "draining", ttl_s: 3, heartbeat_interval_s: 1 });
  });
});

describe("worker states", () => {
  it("count as the manager counts them (worker_server/worker_states.py)", () => {
    const states = ["online", "offline", "draining", "removed"];
    expect(states.filter(isLiveState)).toEqual(["online", "draining"]);
    expect(states.filter(takesAgents)).toEqual(["online"]);
  });

  it("offer undrain only to a drained worker and nothing to a removed one", () => {
    const states = ["online", "offline", "draining", "removed"];
    expect(states.filter(isDrained)).toEqual(["draining"]);
    expect(states.filter(isRemoved)).toEqual(["removed"]);
  });
});
