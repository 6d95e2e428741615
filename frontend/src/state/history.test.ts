import { describe, expect, it } from "vitest";
import type { HistoryPoint, LogLine, WorkerLogs } from "../api/types";
import {
  applyLogRead,
  chartFrame,
  formatClock,
  initialLogFollow,
  lastValue,
  linePath,
  nearestPoint,
  niceMax,
  seriesMax,
  seriesOf,
  stepPoint,
  valuedPoints,
} from "./history";

function point(second: number, over: Partial<HistoryPoint> = {}): HistoryPoint {
  const t = new Date(Date.UTC(2026, 0, 1, 0, 0, second)).toISOString();
  return { t, cpu_percent: 10, rss_bytes: 1000, agents: 5, llm_requests_per_s: null, ...over };
}

function line(sequence: number): LogLine {
  return { sequence, time: "2026-01-01T00:00:00Z", level: "INFO", logger: "populace.worker", message: `line ${sequence}` };
}

function read(lines: LogLine[], last: number): WorkerLogs {
  return { worker_id: 1, lines, last_sequence: last, first_sequence: lines[0]?.sequence ?? last + 1, capacity: 2000 };
}

describe("seriesOf", () => {
  it("turns points into epoch seconds and values, a null rate staying a gap", () => {
    const s = seriesOf([point(0, { llm_requests_per_s: 2 }), point(10)], "llm_requests_per_s");
    expect(s.t[1]! - s.t[0]!).toBe(10);
    expect(s.v).toEqual([2, null]);
    expect(valuedPoints(s)).toBe(1);
    expect(lastValue(s)).toBe(2);
  });

  it("skips points with an unreadable time", () => {
    expect(seriesOf([{ ...point(0), t: "yesterday" }, point(1)], "cpu_percent").t).toHaveLength(1);
  });
});

describe("niceMax", () => {
  it.each([
    [0, 1],
    [-3, 1],
    [0.3, 0.3],
    [0.31, 0.4],
    [7, 8],
    [120, 150],
    [100, 100],
    [205_000, 250_000],
    [8.5, 10],
    [4.2e9, 5e9],
  ])("%s -> %s", (max, nice) => {
    expect(niceMax(max)).toBeCloseTo(nice);
  });
});

describe("chartFrame", () => {
  it("keeps the data's true maximum apart from the round axis top", () => {
    const s = { t: [0, 10, 20], v: [120_000, 205_000, null] };
    expect(seriesMax(s)).toBe(205_000);
    expect(chartFrame(s, 10)).toEqual({ tMin: 0, tMax: 30, vMax: 250_000, dataMax: 205_000 });
  });

  it("has no maximum without values", () => {
    expect(chartFrame({ t: [], v: [] }, 10)).toEqual({ tMin: 0, tMax: 1, vMax: 1, dataMax: null });
    expect(seriesMax({ t: [0], v: [null] })).toBeNull();
  });
});

describe("reading points", () => {
  const s = { t: [0, 10, 20, 30], v: [1, null, 3, 4] };

  it("finds the valued point nearest a time", () => {
    expect(nearestPoint(s, 9)).toBe(0);
    expect(nearestPoint(s, 16)).toBe(2);
    expect(nearestPoint(s, 99)).toBe(3);
    expect(nearestPoint({ t: [0], v: [null] }, 0)).toBeNull();
  });

  it("steps over missing values and stops at the ends", () => {
    expect(stepPoint(s, null, 0)).toBe(3);
    expect(stepPoint(s, 2, -1)).toBe(0);
    expect(stepPoint(s, 0, -1)).toBe(0);
    expect(stepPoint(s, 0, Infinity)).toBe(3);
    expect(stepPoint(s, 3, -Infinity)).toBe(0);
  });

  it("writes a bucket's time of day", () => {
    const t = new Date(2026, 0, 1, 9, 5, 7).getTime() / 1000;
    expect(formatClock(t)).toBe("09:05:07");
  });
});

describe("linePath", () => {
  const box = { width: 100, height: 50, tMin: 0, tMax: 100, vMax: 10, maxGap: 25 };

  it("joins close points and scales them into the box", () => {
    expect(linePath({ t: [0, 20, 40], v: [0, 5, 10] }, box)).toBe("M0.0 50.0 L20.0 25.0 L40.0 0.0");
  });

  it("starts a new segment after a missing value or a silent gap", () => {
    expect(linePath({ t: [0, 10, 20, 30, 90], v: [1, null, 1, 1, 1] }, box)).toBe("M0.0 45.0 M20.0 45.0 L30.0 45.0 M90.0 45.0");
  });

  it("clips values above the axis and leaves out points before the range", () => {
    expect(linePath({ t: [-10, 50], v: [1, 99] }, box)).toBe("M50.0 0.0");
  });
});

describe("applyLogRead", () => {
  it("appends newer lines once each, and moves after to the worker's last line", () => {
    let state = applyLogRead(initialLogFollow, read([line(1), line(2)], 2), 0);
    expect(state.after).toBe(2);
    state = applyLogRead(state, read([line(2), line(3)], 5), 2);
    expect(state.lines.map((l) => l.sequence)).toEqual([1, 2, 3]);
    expect(state.after).toBe(5); // lines 4 and 5 were below the level asked for
  });

  it("keeps only the newest lines", () => {
    const state = applyLogRead(initialLogFollow, read([1, 2, 3, 4, 5].map(line), 5), 0, 3);
    expect(state.lines.map((l) => l.sequence)).toEqual([3, 4, 5]);
  });

  it("starts afresh when the worker's numbers went back (its process restarted)", () => {
    const before = applyLogRead(initialLogFollow, read([line(40)], 40), 0);
    expect(applyLogRead(before, read([], 3), 40)).toEqual(initialLogFollow);
  });
});
