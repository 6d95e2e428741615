import { describe, expect, it } from "vitest";
import type { EventMessage, Population, PopulationProgress } from "../api/types";
import {
  categoryBars,
  cleanupSummary,
  hostedText,
  initialPopulationsState,
  isPlayable,
  placementRows,
  populationAfter,
  populationChoice,
  populationsReducer,
  percentText,
  progressView,
  repairOutcome,
  sortedPopulations,
  statusAfter,
  statusText,
} from "./populations";

function population(id: number, overrides: Partial<Population> = {}): Population {
  return {
    id,
    name: `p${id}`,
    size: 1000,
    hosted: 0,
    seed: "0",
    status: "deploying",
    counts: null,
    error: null,
    dedicated_process: false,
    graph: null,
    created_at: "2025-01-01T00:00:00Z",
    updated_at: "2025-01-01T00:00:00Z",
    ...overrides,
  };
}

function progress(seq: number, payload: PopulationProgress): EventMessage {
  return { type: "population.progress", topic: `population:${payload.population_id}`, seq, payload: { ...payload } };
}

describe("progressView: the bar and its text agree", () => {
  it("leads a deploy stage's text with the percent its bar shows", () => {
    // The reported defect: "Writing personas: 50,000 of 50,000" with the bar at 25 %.
    const view = progressView({ population_id: 1, stage: "personas", done: 50_000, total: 50_000 });
    expect(view.fraction).toBeCloseTo(0.25);
    expect(view.label).toBe("25 % · Writing personas: 50,000 of 50,000 (step 2 of 4)");
    for (const [stage, done] of [["sampled", 3], ["personas", 1], ["persisted", 7], ["created", 9]] as const) {
      const v = progressView({ population_id: 1, stage, done, total: 10 });
      expect(v.label.startsWith(percentText(v.fraction as number))).toBe(true);
    }
    expect(percentText(0.999)).toBe("99 %");
    expect(percentText(1)).toBe("100 %");
  });
});

describe("progressView", () => {
  it("maps each deploy stage onto one bar over the whole deploy", () => {
    expect(progressView({ population_id: 1, stage: "sampled", done: 10, total: 10 }).fraction).toBeCloseTo(0.05);
    expect(progressView({ population_id: 1, stage: "persisted", done: 50, total: 100 }).fraction).toBeCloseTo(0.425);
    expect(progressView({ population_id: 1, stage: "created", done: 100, total: 100 }).fraction).toBe(1);
    expect(progressView({ population_id: 1, stage: "persisted", done: 50_000, total: 100_000 }).label).toBe(
      "42 % · Storing agents: 50,000 of 100,000 (step 3 of 4)",
    );
  });

  it("shows a repair as it goes", () => {
    expect(progressView({ population_id: 1, stage: "replacing", done: 25_000, total: 50_000 })).toEqual({
      label: "Re-placing agents on online workers: 25,000 of 50,000",
      fraction: 0.5,
    });
    expect(progressView({ population_id: 1, stage: "restored", done: 500, total: 500, worker_id: 3 }).label).toBe(
      "500 agents restored on worker 3",
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
    expect(state.byId.get(1)?.hosted).toBe(1000);
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

describe("degraded populations", () => {
  const degraded = population(4, { name: "study", status: "degraded", hosted: 600, size: 1000 });

  it("say how much of them is hosted, wherever their status shows", () => {
    expect(hostedText(degraded)).toBe("600 of 1,000 agents hosted");
    expect(statusText(degraded)).toBe("degraded: 600 of 1,000 agents hosted");
    expect(statusText(population(1, { status: "deployed", hosted: 1000 }))).toBe("deployed");
    expect(populationChoice(degraded)).toBe("study — 600 of 1,000 agents hosted, degraded (#4)");
    expect(populationChoice(population(2, { name: "whole", status: "deployed", hosted: 1000, size: 1000 }))).toBe(
      "whole — 1,000 agents (#2)",
    );
  });

  it("play and can be repaired, like deployed ones", () => {
    expect(isPlayable("degraded")).toBe(true);
    expect(isPlayable("deployed")).toBe(true);
    expect(isPlayable("deploying")).toBe(false);
    expect(isPlayable("deleted")).toBe(false);
  });

  it("follow a repair's event: status and hosted count", () => {
    let state = populationsReducer(initialPopulationsState, { type: "loaded", populations: [degraded] });
    const repaired = { population_id: 4, stage: "repaired", hosted: 1000, size: 1000, status: "deployed" as const, restored: 0, replaced: 400, unplaced: 0 };
    state = populationsReducer(state, { type: "events", events: [progress(7, repaired)] });
    expect(state.byId.get(4)).toMatchObject({ status: "deployed", hosted: 1000 });
    expect(progressView(repaired).label).toBe("Repaired: 400 re-placed, 0 restored; 1,000 of 1,000 agents hosted");
    // A repair that changes nothing leaves the same object (no re-render).
    const whole = state.byId.get(4)!;
    expect(populationAfter(whole, repaired)).toBe(whole);
  });

  it("become degraded when a repair finds no room", () => {
    const deployed = population(4, { status: "deployed", hosted: 1000 });
    const report = { population_id: 4, stage: "repaired", hosted: 600, size: 1000, status: "degraded" as const, restored: 0, replaced: 100, unplaced: 400 };
    expect(populationAfter(deployed, report)).toMatchObject({ status: "degraded", hosted: 600 });
    expect(progressView(report).label).toBe("Repaired: 100 re-placed, 0 restored, 400 found no room; 600 of 1,000 agents hosted");
  });

  it("describe a worker emptied onto the others", () => {
    expect(progressView({ population_id: 1, stage: "worker_cleaned", worker_id: 2, agents: 500, moved: 100, unplaced: 400 }).label).toBe(
      "500 agents taken off worker 2: 100 moved to other workers, 400 found no room",
    );
    expect(progressView({ population_id: 1, stage: "worker_cleaned", worker_id: 2, agents: 500, moved: 500, unplaced: 0 }).label).toBe(
      "500 agents taken off worker 2: 500 moved to other workers",
    );
  });

  it("say what a repair left", () => {
    expect(repairOutcome({ id: 4, status: "deployed", hosted: 1000, size: 1000 })).toEqual({
      ok: true,
      text: "Repaired: all 1,000 agents are hosted by live workers.",
    });
    expect(repairOutcome({ id: 4, status: "degraded", hosted: 600, size: 1000 })).toEqual({
      ok: false,
      text: "Still degraded: 600 of 1,000 agents hosted. No online worker has room for the other 400; add workers (or free capacity) and repair again.",
    });
  });
});

describe("placementRows", () => {
  it("orders workers by id and puts the agents placed nowhere last, whatever the manager calls them", () => {
    expect(placementRows({ "10": 5, "2": 600, None: 400 })).toEqual([
      { worker: 2, agents: 600 },
      { worker: 10, agents: 5 },
      { worker: null, agents: 400 },
    ]);
    expect(placementRows({ null: 3, "1": 7 })).toEqual([
      { worker: 1, agents: 7 },
      { worker: null, agents: 3 },
    ]);
    expect(placementRows({})).toEqual([]);
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
