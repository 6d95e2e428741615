import { describe, expect, it } from "vitest";
import type { SimulationRound } from "../api/types";
import {
  compareHref,
  compareNotice,
  configDiff,
  defaultCurves,
  flattenConfig,
  mapLimit,
  MAX_COMPARED,
  chosenCurves,
  compareCurves,
  curveStyle,
  curveValue,
  overlaySeries,
  parseCompareIds,
  readCompareIds,
  readoutAt,
  runColor,
  segmentComparison,
  toggleSelected,
} from "./compare";

function round(n: number, mean: number, segments: SimulationRound["segments"] = {}): SimulationRound {
  return { round: n, mean, target: mean * 0.5, winner_value: mean * 0.4, segments } as SimulationRound;
}

describe("ids", () => {
  it("parses ids from the URL, dropping junk and repeats, capped", () => {
    expect(parseCompareIds("3,1,3,x,,2")).toEqual([3, 1, 2]);
    expect(parseCompareIds(null)).toEqual([]);
    expect(parseCompareIds("0,-1,1.5")).toEqual([]);
    // A 12-run sweep is compared whole (it was cut to 6, silently).
    expect(parseCompareIds("1,2,3,4,5,6,7,8,9,10,11,12")).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
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
    const { x, series } = overlaySeries([[round(1, 50), round(2, 30)], [round(1, 40), round(2, 20), round(3, 10)]], ["mean", "target", "winner_value"]);
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

describe("what a comparison leaves out", () => {
  it("keeps every id up to a sweep's largest grid and names the ones past it", () => {
    const many = Array.from({ length: MAX_COMPARED + 3 }, (_, i) => i + 1).join(",");
    const selection = readCompareIds(`${many},x,0`);
    expect(selection.ids).toHaveLength(MAX_COMPARED);
    expect(selection.beyondLimit).toEqual([MAX_COMPARED + 1, MAX_COMPARED + 2, MAX_COMPARED + 3]);
    expect(selection.invalid).toEqual(["x", "0"]);
  });

  it("says nothing when every run asked for is compared", () => {
    const selection = readCompareIds("1,2,3");
    expect(compareNotice(selection, [1, 2, 3].map((id) => ({ id, state: "loaded" as const })))).toBeNull();
  });

  it("says which runs are missing, failed or beyond the limit, and why", () => {
    const selection = readCompareIds("4,5,6,x");
    const notice = compareNotice(selection, [
      { id: 4, state: "loaded" },
      { id: 5, state: "missing" },
      { id: 6, state: "failed", reason: "Cannot reach the manager (Failed to fetch)" },
    ]);
    expect(notice).toBe(
      'Comparing 1 of the 3 runs asked for: #5 does not exist; #6 could not be loaded (Cannot reach the manager (Failed to fetch)); "x" is not a run id.',
    );
  });

  it("loads with bounded concurrency, results in order", async () => {
    let running = 0;
    let most = 0;
    const out = await mapLimit([1, 2, 3, 4, 5, 6, 7], 3, async (n) => {
      running += 1;
      most = Math.max(most, running);
      await new Promise((r) => setTimeout(r, 1));
      running -= 1;
      return n * 10;
    });
    expect(out).toEqual([10, 20, 30, 40, 50, 60, 70]);
    expect(most).toBe(3);
  });

  it("gives each of twelve runs its own colour", () => {
    expect(new Set(Array.from({ length: 12 }, (_, i) => runColor(i))).size).toBe(12);
  });
});

describe("the chart's readout", () => {
  const runs = [
    { id: 1, name: "short" },
    { id: 2, name: "long" },
  ];
  const short = [round(1, 50), round(2, 30)];
  const long = [round(1, 40), round(2, 20), round(3, 10)];

  const guess = compareCurves([null]); // a manager that declared no metrics: the game's columns
  const [mean, target] = guess;

  it("offers every metric the runs declare, drawing the game's three for a few runs and its mean for many", () => {
    expect(guess.map((c) => c.name)).toEqual(["mean", "target", "winner_value"]);
    expect(defaultCurves(guess, 2)).toEqual(["mean", "target", "winner_value"]);
    expect(defaultCurves(guess, 12)).toEqual(["mean"]);
    const goods = compareCurves([
      [{ name: "contribution", title: "Mean contribution" }],
      [{ name: "contribution", title: "Mean contribution" }, { name: "payoff", title: "Mean payoff" }],
    ]);
    expect(goods).toEqual([
      { name: "contribution", title: "Mean contribution" },
      { name: "payoff", title: "Mean payoff" },
    ]);
    expect(defaultCurves(goods, 2)).toEqual(["contribution"]);
    expect(overlaySeries([short, long], ["mean"]).series).toEqual([
      [50, 30, null],
      [40, 20, 10],
    ]);
  });

  it("keeps the metrics chosen in the URL, those the runs have", () => {
    expect(chosenCurves(guess, "target,bogus", 2)).toEqual(["target"]);
    expect(chosenCurves(guess, "winner_value,mean", 2)).toEqual(["mean", "winner_value"]);
    expect(chosenCurves(guess, "bogus", 12)).toEqual(["mean"]);
    expect(chosenCurves(guess, null, 2)).toEqual(["mean", "target", "winner_value"]);
  });

  it("reads a declared metric from the round's metrics, an older round's from its column", () => {
    const declared = { ...round(1, 50), metrics: { contribution: 7 } } as SimulationRound;
    expect(curveValue(declared, "contribution")).toBe(7);
    expect(curveValue(round(1, 50), "mean")).toBe(50);
    expect(curveValue(round(1, 50), "payoff")).toBeNull();
    expect(curveValue(undefined, "mean")).toBeNull();
    expect([0, 1, 2, 5].map((i) => curveStyle(i).dash ?? null)).toEqual([null, [6, 4], null, null]);
  });

  it("lists at a round only the runs and values that exist there", () => {
    const curves = [mean!, target!];
    const overlay = overlaySeries([short, long], ["mean", "target"]);
    expect(readoutAt(overlay, runs, curves, null)).toBeNull();
    const third = readoutAt(overlay, runs, curves, 2);
    expect(third?.round).toBe(3);
    expect(third?.runs).toEqual([{ id: 2, name: "long", color: runColor(1), values: [{ label: "Mean guess", value: 10 }, { label: "Target", value: 5 }] }]);
    expect(readoutAt(overlay, runs, curves, 0)?.runs.map((r) => r.id)).toEqual([1, 2]);
  });
});
