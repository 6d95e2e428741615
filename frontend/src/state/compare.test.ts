import { describe, expect, it } from "vitest";
import type { SimulationRound } from "../api/types";
import { compareHref, configDiff, flattenConfig, MAX_COMPARED, overlaySeries, parseCompareIds, segmentComparison, toggleSelected } from "./compare";

function round(n: number, mean: number, segments: SimulationRound["segments"] = {}): SimulationRound {
  return { round: n, mean, target: mean * 0.5, winner_value: mean * 0.4, segments } as SimulationRound;
}

describe("ids", () => {
  it("parses ids from the URL, dropping junk and repeats, capped", () => {
    expect(parseCompareIds("3,1,3,x,,2")).toEqual([3, 1, 2]);
    expect(parseCompareIds(null)).toEqual([]);
    expect(parseCompareIds("0,-1,1.5")).toEqual([]);
    expect(parseCompareIds("1,2,3,4,5,6,7,8")).toHaveLength(MAX_COMPARED);
    expect(compareHref([4, 2])).toBe("/compare?ids=4,2");
  });

  it("toggles a selection in picking order", () => {
    expect(toggleSelected([1, 2], 3)).toEqual([1, 2, 3]);
    expect(toggleSelected([1, 2, 3], 2)).toEqual([1, 3]);
  });
});

describe("config diff", () => {
  it("flattens nested configs to dotted paths", () => {
    expect(flattenConfig({ rule: { preset: "2/3", min: 0 }, segment_by: ["a", "b"], empty: {}, none: [] , x: null })).toEqual({
      "rule.preset": "2/3",
      "rule.min": "0",
      "segment_by.0": "a",
      "segment_by.1": "b",
      empty: "{}",
      none: "[]",
      x: "null",
    });
  });

  it("marks the paths the runs disagree on, including ones only one run has", () => {
    const rows = configDiff([
      { seed: "5", rounds: 3, policy: { kind: "synthetic" } },
      { seed: "6", rounds: 3, policy: { kind: "synthetic", latency_s: 0 } },
    ]);
    const differing = rows.filter((r) => r.differs).map((r) => r.path);
    expect(differing).toEqual(["policy.latency_s", "seed"]);
    expect(rows.find((r) => r.path === "policy.latency_s")?.values).toEqual([null, "0"]);
    expect(rows.find((r) => r.path === "rounds")?.differs).toBe(false);
  });

  it("sorts array indexes as numbers", () => {
    const rows = configDiff([{ a: Array.from({ length: 11 }, (_, i) => i) }]);
    expect(rows.map((r) => r.path).slice(0, 3)).toEqual(["a.0", "a.1", "a.2"]);
    expect(rows[rows.length - 1]?.path).toBe("a.10");
  });
});

describe("overlay", () => {
  it("aligns runs of different lengths on every round any played", () => {
    const { x, series } = overlaySeries([[round(1, 50), round(2, 30)], [round(1, 40), round(2, 20), round(3, 10)]]);
    expect(x).toEqual([1, 2, 3]);
    expect(series).toHaveLength(6);
    expect(series[0]).toEqual([50, 30, null]); // run 1 mean
    expect(series[1]).toEqual([25, 15, null]); // run 1 target
    expect(series[3]).toEqual([40, 20, 10]); // run 2 mean
  });

  it("puts segment means of each run's last round side by side", () => {
    const a = round(3, 20, { education: { phd: { count: 2, mean: 10, std: 1 } } });
    const b = round(5, 30, { education: { phd: { count: 2, mean: 12, std: 1 }, none: { count: 3, mean: 40, std: 2 } } });
    const [education] = segmentComparison([a, b, undefined]);
    expect(education?.attribute).toBe("education");
    expect(education?.rows).toEqual([
      { category: "none", means: [null, 40, null], counts: [null, 3, null] },
      { category: "phd", means: [10, 12, null], counts: [2, 2, null] },
    ]);
  });
});

describe("route", () => {
  it("has a page at /compare", async () => {
    const { matchRoute } = await import("../router");
    expect(matchRoute("/compare")).toEqual({ page: "compare" });
    expect(matchRoute("/compare/")).toEqual({ page: "compare" });
  });
});
