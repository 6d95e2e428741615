import { describe, expect, it } from "vitest";
import { type SweepRun, defaultOutcome, nearestPlotPoint, outcomeChoices, paramAxes, paramText, runsWithoutOutcome, sweepPlot, xOf } from "./sweepPlot";

const grid = { "rule.ratio": [0.5, 0.75, 1], rule: [{ preset: "2/3" }, { preset: "1/2+5" }], seed: [1, 2] };

function run(point: number, params: Record<string, unknown>, mean: number | null, status = "completed", simulationId: number | null = 100 + point): SweepRun {
  return { point, simulationId, params, status, metrics: mean === null ? {} : { mean } };
}

describe("the sweep's outcome-by-param plots", () => {
  it("puts numbers on a number line and anything else in grid order", () => {
    const [ratio, rule] = paramAxes(grid);
    expect(ratio).toEqual({ key: "rule.ratio", kind: "number", min: 0.5, max: 1 });
    expect(rule).toEqual({ key: "rule", kind: "category", categories: ['{"preset":"2/3"}', '{"preset":"1/2+5"}'] });
    expect(xOf(ratio!, 0.75)).toBe(0.5);
    expect(xOf(rule!, { preset: "1/2+5" })).toBe(0.75);
    expect(xOf(rule!, { preset: "none" })).toBeNull();
    expect(paramText("2/3")).toBe("2/3");
  });

  it("has one point per run with a value, read left to right, on a padded y range", () => {
    const runs = [
      run(1, { "rule.ratio": 1 }, 40),
      run(2, { "rule.ratio": 0.5 }, 20),
      run(3, { "rule.ratio": 0.75 }, 30, "running"),
      run(4, { "rule.ratio": 0.5 }, null), // no round kept yet
      run(5, { "rule.ratio": 1 }, null, "pending", null), // not launched
    ];
    const [axis] = paramAxes({ "rule.ratio": [0.5, 0.75, 1] });
    const plot = sweepPlot(axis!, runs, { name: "mean", type: "number" });
    expect(plot.points.map((p) => [p.simulationId, p.x, p.param, p.finished])).toEqual([
      [102, 0, "0.5", true],
      [103, 0.5, "0.75", false],
      [101, 1, "1", true],
    ]);
    expect(plot.range).toEqual([19, 41]);
    expect(plot.points[0]!.y).toBeCloseTo(1 / 22);
    expect(runsWithoutOutcome(runs, "mean")).toBe(2);
  });

  it("offers the declared metrics, the mean first, or the names the runs carry", () => {
    const declared = [
      { name: "winner_value", title: "Winning number", type: "number" as const, unit: "", description: "" },
      { name: "mean", title: "Mean guess", type: "number" as const, unit: "", description: "" },
    ];
    expect(defaultOutcome(outcomeChoices(declared, []), null)).toBe("mean");
    expect(defaultOutcome(outcomeChoices(declared, []), "winner_value")).toBe("winner_value");
    expect(defaultOutcome(outcomeChoices(declared, []), "gone")).toBe("mean");
    expect(outcomeChoices([], [run(1, {}, 3)]).map((m) => m.name)).toEqual(["mean"]);
    expect(defaultOutcome([], null)).toBeNull();
  });

  it("reads the point nearest the pointer", () => {
    const [axis] = paramAxes({ seed: [1, 2] });
    const plot = sweepPlot(axis!, [run(1, { seed: 1 }, 10), run(2, { seed: 2 }, 20)], { name: "mean", type: "number" });
    expect(nearestPlotPoint(plot.points, 0.9, 0.9)).toBe(1);
    expect(nearestPlotPoint(plot.points, 0.1, 0.1)).toBe(0);
    expect(nearestPlotPoint([], 0, 0)).toBeNull();
  });

  it("draws runs with the same outcome at the same value side by side, not on top of each other", () => {
    const [axis] = paramAxes({ seed: [1, 2] });
    const plot = sweepPlot(axis!, [run(1, { seed: 1 }, 10), run(2, { seed: 1 }, 10), run(3, { seed: 1 }, 10), run(4, { seed: 2 }, 10)], { name: "mean", type: "number" });
    expect(plot.points.map((p) => [p.point, p.dodge])).toEqual([
      [1, 0],
      [2, 1],
      [3, -1],
      [4, 0],
    ]);
  });
});
