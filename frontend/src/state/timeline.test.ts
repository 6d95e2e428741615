import { describe, expect, it } from "vitest";
import type { EventMessage, TimelineEntry } from "../api/types";
import { addEntries, emptyTimeline, entriesFromEvents, entryTone, lastId, newestFirst, roundTimes } from "./timeline";

function entry(id: number, overrides: Partial<TimelineEntry> = {}): TimelineEntry {
  return {
    id,
    simulation_id: 7,
    kind: "round",
    round: id,
    message: `round ${id} of 10 finished: mean 33.00, 0.5 s`,
    data: {},
    time: `2026-12-04T10:00:${String(id).padStart(2, "0")}+00:00`,
    ...overrides,
  };
}

describe("addEntries", () => {
  it("merges REST pages and live events once each, oldest first", () => {
    const fetched = addEntries(emptyTimeline, [entry(2), entry(1)]);
    const live = addEntries(fetched, [entry(3), entry(2)]);
    expect(live.entries.map((e) => e.id)).toEqual([1, 2, 3]);
    expect(lastId(live)).toBe(3);
    expect(addEntries(live, [entry(1)])).toBe(live);
    expect(lastId(emptyTimeline)).toBeNull();
  });

  it("stays bounded, dropping the oldest and saying so", () => {
    const many = Array.from({ length: 8 }, (_, i) => entry(i + 1));
    const state = addEntries(emptyTimeline, many, 5);
    expect(state.entries.map((e) => e.id)).toEqual([4, 5, 6, 7, 8]);
    expect(state.truncated).toBe(true);
    expect(addEntries(emptyTimeline, many.slice(0, 3), 5).truncated).toBe(false);
  });
});

describe("entriesFromEvents", () => {
  it("takes this run's timeline.added events only", () => {
    const cancelled = entry(9, { kind: "cancelled", round: 3, message: "cancelled: wrong prompt" });
    const events: EventMessage[] = [
      { type: "round.progress", payload: { simulation_id: 7 } },
      { type: "timeline.added", payload: { ...cancelled } },
      { type: "timeline.added", payload: { ...entry(10), simulation_id: 8 } },
      { type: "timeline.added", payload: { id: "x" } },
    ];
    expect(entriesFromEvents(events, 7)).toEqual([cancelled]);
  });
});

describe("views", () => {
  it("lists the newest first and gives the rounds' finish times", () => {
    const state = addEntries(emptyTimeline, [entry(1, { kind: "launched", round: null, message: "launched: 10 rounds" }), entry(2), entry(3)]);
    expect(newestFirst(state, 2).map((e) => e.id)).toEqual([3, 2]);
    expect(roundTimes(state)).toEqual([
      { round: 2, at: Date.parse("2026-12-04T10:00:02Z") },
      { round: 3, at: Date.parse("2026-12-04T10:00:03Z") },
    ]);
  });

  it("gives each kind a tone", () => {
    expect(entryTone("failed")).toBe("bad");
    expect(entryTone("cancelled")).toBe("warn");
    expect(entryTone("completed")).toBe("good");
    expect(entryTone("something new")).toBe("info");
  });
});
