import { describe, expect, it } from "vitest";
import type { SimulationRound } from "../api/types";
import {
  INTEGER_STEPS,
  type MetricDeclaration,
  chartedMetrics,
  formatMetric,
  formatMetricWithUnit,
  metricChartLabel,
  metricRange,
  metricSeries,
  metricValue,
} from "./metrics";

function round(n: number, metrics?: Record<string, number | null>): SimulationRound {
  return {
    round: n,
    n_valid: 10,
    n_invalid: 0,
    n_late: 0,
    n_lost: 0,
    mean: 1,
    median: 1,
    std: 0,
    min: 1,
    max: 1,
    target: 1,
    winner_value: 1,
    winner_count: 1,
    winner_agents: [],
    histogram: [10],
    segments: {},
    prompt_tokens: 0,
    cached_prompt_tokens: 0,
    completion_tokens: 0,
    llm_errors: 0,
    llm_requests: 0,
    duration_s: 0.1,
    network_bytes: 0,
    decisions_stored: null,
    participation: 1,
    parse_failure_rate: 0,
    ...(metrics === undefined ? {} : { metrics }),
  };
}

const MEAN: MetricDeclaration = { name: "mean", title: "Mean guess", type: "number", unit: "", description: "Mean of the valid guesses" };
const WINNERS: MetricDeclaration = { name: "winner_count", title: "Winners", type: "integer", unit: "agents", description: "" };

describe("chartedMetrics", () => {
  it("charts the declarations when rounds carry metrics, or before any round", () => {
    expect(chartedMetrics([MEAN, WINNERS], [round(1, { mean: 3 })])).toEqual([MEAN, WINNERS]);
    expect(chartedMetrics([MEAN], [])).toEqual([MEAN]);
  });

  it("charts nothing for an older manager: no declarations, or rounds without metrics", () => {
    expect(chartedMetrics(undefined, [round(1, { mean: 3 })])).toEqual([]);
    expect(chartedMetrics(null, [])).toEqual([]);
    expect(chartedMetrics([], [round(1, { mean: 3 })])).toEqual([]);
    expect(chartedMetrics([MEAN], [round(1), round(2)])).toEqual([]);
  });
});

describe("metricSeries", () => {
  it("reads each round's value by name, a missing or null value staying a gap (never 0)", () => {
    const rounds = [round(1, { mean: 3.5 }), round(2, { mean: null }), round(3), round(4, {}), round(5, { mean: 0 })];
    expect(metricSeries(rounds, "mean")).toEqual([
      [1, 2, 3, 4, 5],
      [3.5, null, null, null, 0],
    ]);
    expect(metricValue(undefined, "mean")).toBeNull();
    expect(metricValue({ ...round(1), metrics: { mean: Number.NaN } }, "mean")).toBeNull();
  });
});

describe("formatMetric", () => {
  it("writes integers whole and numbers to two decimals", () => {
    expect(formatMetric(1234, WINNERS)).toBe("1,234");
    expect(formatMetric(3.6, WINNERS)).toBe("4");
    expect(formatMetric(33.3333, MEAN)).toBe("33.33");
    expect(formatMetric(40, MEAN)).toBe("40");
    expect(formatMetric(null, MEAN)).toBe("–");
    expect(formatMetric(undefined, WINNERS)).toBe("–");
  });

  it("adds the unit after a value, not after a missing one", () => {
    expect(formatMetricWithUnit(12, WINNERS)).toBe("12 agents");
    expect(formatMetricWithUnit(null, WINNERS)).toBe("–");
    expect(formatMetricWithUnit(2.5, MEAN)).toBe("2.5");
    expect(formatMetricWithUnit(40, { type: "number", unit: "%" })).toBe("40%");
  });
});

describe("metricRange", () => {
  it("pads the values, never below 0 for values that are not", () => {
    expect(metricRange(10, 30, false)).toEqual([9, 31]);
    expect(metricRange(0.5, 10.5, false)).toEqual([0, 11]);
    expect(metricRange(-10, 10, false)).toEqual([-11, 11]);
  });

  it("widens a flat series and keeps an integer axis whole", () => {
    expect(metricRange(0, 0, true)).toEqual([0, 1]);
    expect(metricRange(5, 5, true)).toEqual([4, 6]);
    expect(metricRange(20, 20, false)).toEqual([18, 22]);
    expect(metricRange(1, 10, true)).toEqual([0, 11]);
    expect(metricRange(null, null, false)).toEqual([0, 1]);
  });

  it("steps an integer axis by whole numbers", () => {
    expect(INTEGER_STEPS.slice(0, 6)).toEqual([1, 2, 5, 10, 20, 50]);
    expect(INTEGER_STEPS.every(Number.isInteger)).toBe(true);
  });
});

describe("metricChartLabel", () => {
  it("names the metric, its latest value and extremes with their rounds", () => {
    const rounds = [round(1, { winner_count: 3 }), round(2, { winner_count: null }), round(3, { winner_count: 1 }), round(4, { winner_count: 2 })];
    expect(metricChartLabel(WINNERS, rounds)).toBe(
      "Winners (agents) over 4 rounds; round 4: 2 agents; lowest 1 agents (round 3), highest 3 agents (round 1); 1 round without a value",
    );
  });

  it("says when there is nothing to draw", () => {
    expect(metricChartLabel(MEAN, [])).toBe("Mean guess: no rounds yet");
    expect(metricChartLabel(MEAN, [round(1, { mean: null })])).toBe("Mean guess over 1 round; no values");
  });
});
