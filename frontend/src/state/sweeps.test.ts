import { describe, expect, it } from "vitest";
import { ApiClient } from "../api/client";
import {
  compareHref,
  fetchSweep,
  initialSweepView,
  initialSweepsState,
  paramsText,
  progressText,
  type Sweep,
  type SweepDetail,
  type SweepRow,
  sweepViewReducer,
  sweepsReducer,
  sortedSweeps,
  tokensOf,
} from "./sweeps";

function sweep(overrides: Partial<Sweep> = {}): Sweep {
  return {
    id: 1,
    name: "rule-by-seed",
    status: "running",
    mode: "sequence",
    runs: 2,
    error: null,
    created_at: "2026-01-01T00:00:00Z",
    finished_at: null,
    ...overrides,
  };
}

function row(point: number, overrides: Partial<SweepRow> = {}): SweepRow {
  return {
    point,
    params: { seed: point },
    simulation_id: null,
    population_id: null,
    status: null,
    rounds: null,
    rounds_played: null,
    final_mean: null,
    target: null,
    winner_value: null,
    n_valid: null,
    prompt_tokens: null,
    completion_tokens: null,
    error: null,
    ...overrides,
  };
}

function detail(rows: SweepRow[]): SweepDetail {
  return { ...sweep({ runs: rows.length }), config: {}, grid: { seed: rows.map((r) => r.point) }, launched: 0, finished: 0, results: { items: rows, next_after: null } };
}

const runEvent = (point: number, status: string, simulationId = 10 + point, currentRound = 1) => ({
  type: "sweep.run",
  payload: { sweep_id: 1, point, simulation_id: simulationId, population_id: 3, status, current_round: currentRound, rounds: 5 },
});

describe("sweepViewReducer", () => {
  it("moves a row with its run's events and asks for the final numbers when the run ends", () => {
    let view = sweepViewReducer(initialSweepView, { type: "loaded", detail: detail([row(1), row(2)]) });
    view = sweepViewReducer(view, { type: "events", events: [runEvent(1, "running", 11, 2)] });
    expect(view.detail?.results.items[0]).toMatchObject({ simulation_id: 11, status: "running", rounds_played: 2, rounds: 5 });
    expect(view.detail?.results.items[1]?.simulation_id).toBeNull();
    expect(view.stale).toBe(false);
    view = sweepViewReducer(view, { type: "events", events: [runEvent(1, "completed", 11, 5)] });
    expect(view.stale).toBe(true);
    expect(progressText(view.detail as SweepDetail)).toBe("1 of 2 runs finished");
  });

  it("takes the sweep's status from sweep.updated and notices a delete", () => {
    let view = sweepViewReducer(initialSweepView, { type: "loaded", detail: detail([row(1)]) });
    view = sweepViewReducer(view, { type: "events", events: [{ type: "sweep.updated", payload: { sweep_id: 1, status: "failed", error: "point 1 refused" } }] });
    expect(view.detail).toMatchObject({ status: "failed", error: "point 1 refused" });
    expect(view.stale).toBe(true);
    view = sweepViewReducer(view, { type: "events", events: [{ type: "sweep.deleted", payload: { sweep_id: 1 } }] });
    expect(view.deleted).toBe(true);
  });

  it("ignores events of points it does not show, keeping the same state", () => {
    const view = sweepViewReducer(initialSweepView, { type: "loaded", detail: detail([row(1)]) });
    expect(sweepViewReducer(view, { type: "events", events: [runEvent(7, "completed")] })).toBe(view);
  });
});

describe("sweepsReducer", () => {
  it("updates known sweeps, refetches for unknown ones, drops deleted ones", () => {
    let state = sweepsReducer(initialSweepsState, { type: "loaded", sweeps: [sweep({ id: 1 }), sweep({ id: 2 })] });
    state = sweepsReducer(state, { type: "events", events: [{ type: "sweep.updated", payload: { sweep_id: 2, status: "completed", error: null } }] });
    expect(state.byId.get(2)?.status).toBe("completed");
    expect(state.stale).toBe(false);
    state = sweepsReducer(state, { type: "events", events: [{ type: "sweep.updated", payload: { sweep_id: 9, status: "running" } }] });
    expect(state.stale).toBe(true);
    state = sweepsReducer(state, { type: "events", events: [{ type: "sweep.deleted", payload: { sweep_id: 1 } }] });
    expect(sortedSweeps(state.byId).map((s) => s.id)).toEqual([2]);
  });
});

describe("what the pages show", () => {
  it("links the comparison of the launched runs only", () => {
    expect(compareHref([row(1, { simulation_id: 4 }), row(2, { simulation_id: 7 }), row(3)])).toBe("/compare?ids=4,7");
    expect(compareHref([row(1, { simulation_id: 4 }), row(2)])).toBeNull();
  });

  it("writes params in grid order and sums tokens", () => {
    expect(paramsText({ rule: { preset: "2/3" }, seed: 1, "prompt.user": "cot" })).toBe('rule={"preset":"2/3"}, seed=1, prompt.user=cot');
    expect(tokensOf(row(1))).toBeNull();
    expect(tokensOf(row(1, { prompt_tokens: 10, completion_tokens: 5 }))).toBe(15);
  });
});

describe("fetchSweep", () => {
  it("follows the results pages into one table", async () => {
    const pages: Record<string, SweepDetail> = {
      "/api/sweeps/1?limit=1000": { ...detail([row(1)]), results: { items: [row(1)], next_after: 1 } },
      "/api/sweeps/1?limit=1000&after=1": { ...detail([row(2)]), results: { items: [row(2)], next_after: null } },
    };
    const seen: string[] = [];
    const client = new ApiClient("t", async (input) => {
      seen.push(input);
      return new Response(JSON.stringify(pages[input]), { status: 200 });
    });
    const result = await fetchSweep(client, 1);
    expect(seen).toEqual(Object.keys(pages));
    expect(result.results.items.map((r) => r.point)).toEqual([1, 2]);
  });
});

describe("routes", () => {
  it("has a page for the list and one per sweep", async () => {
    const { matchRoute } = await import("../router");
    expect(matchRoute("/sweeps")).toEqual({ page: "sweeps" });
    expect(matchRoute("/sweeps/12/")).toEqual({ page: "sweep", id: 12 });
  });
});
