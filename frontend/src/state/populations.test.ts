import { describe, expect, it } from "vitest";
import type { EventMessage, Population, PopulationProgress } from "../api/types";
import {
  categoryBars,
  cleanupSummary,
  initialPopulationsState,
  populationsReducer,
  progressView,
  sortedPopulations,
  statusAfter,
} from "./populations";

function population(id: number, overrides: Partial<Population> = {}): Population {
  return {
    id,
    name: `p${id}`,
    size: 1000,
    seed: 0,
    status: "deploying",
    counts: null,
    error: null,
    created_at: "2025-01-01T00:00:00Z",
    updated_at: "2025-01-01T00:00:00Z",
    ...overrides,
  };
}

function progress(seq: number, payload: PopulationProgress): EventMessage {
  return { type: "population.progress", topic: `population:${payload.population_id}`, seq, payload: { ...payload } };
}

describe("progressView", () => {
  it("maps each deploy stage onto one bar over the whole deploy", () => {
    expect(progressView({ population_id: 1, stage: "sampled", done: 10, total: 10 }).fraction).toBeCloseTo(0.05);
    expect(progressView({ population_id: 1, stage: "persisted", done: 50, total: 100 }).fraction).toBeCloseTo(0.425);
    expect(progressView({ population_id: 1, stage: "created", done: 100, total: 100 }).fraction).toBe(1);
    expect(progressView({ population_id: 1, stage: "persisted", done: 50_000, total: 100_000 }).label).toBe(
      "Storing agents: 50,000 of 100,000",
    );
  });

  it("never exceeds its stage and copes with a missing total", () => {
    expect(progressView({ population_id: 1, stage: "personas", done: 999, total: 10 }).fraction).toBeCloseTo(0.25);
    expect(progressView({ population_id: 1, stage: "sampled" }).fraction).toBeCloseTo(0.05);
  });

  it("describes failure, deletion and clean-up", () => {
    expect(progressView({ population_id: 1, stage: "failed", error: "worker 2 refused" })).toEqual({
      label: "Failed: worker 2 refused",
      fraction: null,
    });
    expect(progressView({ population_id: 1, stage: "deleting" }).fraction).toBeNull();
    expect(progressView({ population_id: 1, stage: "worker_orphaned", worker_id: 3, agents: 1200 }).label).toBe(
      "1,200 agents on offline worker 3 left for the reaper",
    );
  });
});

describe("cleanupSummary", () => {
  it("says where the agents went", () => {
    expect(cleanupSummary({ population_id: 1, stage: "deleted", workers_cleaned: 2, workers_orphaned: 0 })).toBe(
      "Deleted: agents removed from 2 workers",
    );
    expect(cleanupSummary({ population_id: 1, stage: "deleted", workers_cleaned: 1, workers_orphaned: 1 })).toBe(
      "Deleted: agents removed from 1 worker; 1 worker offline (its agents are removed when back)",
    );
  });
});

describe("statusAfter", () => {
  it("knows which stages change the status", () => {
    expect(statusAfter("persisted")).toBe("deploying");
    expect(statusAfter("deployed")).toBe("deployed");
    expect(statusAfter("deleted")).toBe("deleted");
    expect(statusAfter("worker_cleaned")).toBeNull();
  });
});

describe("populationsReducer", () => {
  it("follows a deploy to the end and keeps the last progress", () => {
    let state = populationsReducer(initialPopulationsState, { type: "loaded", populations: [population(1)] });
    state = populationsReducer(state, {
      type: "events",
      events: [
        progress(5, { population_id: 1, stage: "sampled", done: 1000, total: 1000 }),
        progress(6, { population_id: 1, stage: "deployed", done: 1000, total: 1000 }),
      ],
    });
    expect(state.byId.get(1)?.status).toBe("deployed");
    expect(state.progress.get(1)?.stage).toBe("deployed");
    expect(state.stale).toBe(false);
  });

  it("records a failure's reason", () => {
    let state = populationsReducer(initialPopulationsState, { type: "loaded", populations: [population(1)] });
    state = populationsReducer(state, { type: "events", events: [progress(2, { population_id: 1, stage: "failed", error: "boom" })] });
    expect(state.byId.get(1)).toMatchObject({ status: "failed", error: "boom" });
  });

  it("marks the list stale when a population it does not know reports", () => {
    const state = populationsReducer(initialPopulationsState, {
      type: "events",
      events: [progress(1, { population_id: 9, stage: "sampled" })],
    });
    expect(state.stale).toBe(true);
    const reloaded = populationsReducer(state, { type: "loaded", populations: [population(9)] });
    expect(reloaded.stale).toBe(false);
    expect(reloaded.progress.get(9)?.stage).toBe("sampled");
  });

  it("returns the same state for events it does not care about", () => {
    const state = populationsReducer(initialPopulationsState, { type: "loaded", populations: [] });
    expect(populationsReducer(state, { type: "events", events: [{ type: "worker.updated", seq: 3 }] })).toBe(state);
  });

  it("lists newest first", () => {
    const byId = new Map([1, 3, 2].map((id) => [id, population(id)] as const));
    expect(sortedPopulations(byId).map((p) => p.id)).toEqual([3, 2, 1]);
  });
});

describe("categoryBars", () => {
  it("gives each category its share, largest first", () => {
    expect(categoryBars({ bachelor: 300, "high school": 500, doctorate: 200 })).toEqual([
      { name: "high school", count: 500, share: 0.5 },
      { name: "bachelor", count: 300, share: 0.3 },
      { name: "doctorate", count: 200, share: 0.2 },
    ]);
    expect(categoryBars({ a: 0 })).toEqual([{ name: "a", count: 0, share: 0 }]);
  });
});
