import { describe, expect, it } from "vitest";
import type { EndpointMeter } from "../api/types";
import { anyCost, formatCost, formatDuration, formatLatency, formatRate, formatTimestamp, roundSpan, runMeters, runSpan, sumMeters, totalOf } from "./meters";

function meter(overrides: Partial<EndpointMeter> = {}): EndpointMeter {
  return {
    base_url: "http://a:8000/v1",
    model: "gemma",
    requests: 10,
    errors: 1,
    skipped: 0,
    late: 2,
    prompt_tokens: 1000,
    completion_tokens: 50,
    latency_p50_s: 0.5,
    latency_p95_s: 1.5,
    requests_per_s: 4,
    cost_usd: 0.01,
    ...overrides,
  };
}

describe("sumMeters", () => {
  it("adds counts and cost per endpoint and keeps the worst latency", () => {
    const [sum, other] = sumMeters([
      [meter(), meter({ model: "llama" })],
      [meter({ requests: 30, latency_p95_s: 3, latency_p50_s: 0.2, requests_per_s: 8, cost_usd: 0.02 })],
    ]);
    expect(sum).toMatchObject({ requests: 40, errors: 2, late: 4, prompt_tokens: 2000, completion_tokens: 100, latency_p50_s: 0.5, latency_p95_s: 3 });
    expect(sum?.cost_usd).toBeCloseTo(0.03);
    // Weighted by requests: (4·10 + 8·30) / 40.
    expect(sum?.requests_per_s).toBeCloseTo(7);
    expect(other?.model).toBe("llama");
  });

  it("keeps a null cost null unless some round has a price", () => {
    const [a] = sumMeters([[meter({ cost_usd: null })], [meter({ cost_usd: null })]]);
    expect(a?.cost_usd).toBeNull();
    const [b] = sumMeters([[meter({ cost_usd: null })], [meter({ cost_usd: 0.5 })]]);
    expect(b?.cost_usd).toBe(0.5);
    expect(anyCost([meter({ cost_usd: null })])).toBe(false);
    expect(anyCost([meter()])).toBe(true);
  });

  it("skips rounds without meters", () => {
    expect(sumMeters([undefined, []])).toEqual([]);
  });
});

describe("runMeters and totalOf", () => {
  it("prefers the manager's stored sums, else sums the rounds", () => {
    const stored = [meter({ requests: 99 })];
    expect(runMeters(stored, [])).toEqual(stored);
    const rounds = [{ endpoints: [meter()] }, { endpoints: [meter()] }] as never;
    expect(runMeters([], rounds)[0]?.requests).toBe(20);
    expect(runMeters(undefined, rounds)[0]?.requests).toBe(20);
  });

  it("totals several endpoints, none for one", () => {
    expect(totalOf([meter()])).toBeNull();
    expect(totalOf([meter(), meter({ model: "x", requests: 5 })])?.requests).toBe(15);
  });
});

describe("formatting", () => {
  it("formats latency, rate, cost and duration", () => {
    expect(formatLatency(0.123)).toBe("123 ms");
    expect(formatLatency(2.345)).toBe("2.35 s");
    expect(formatLatency(null)).toBe("–");
    expect(formatRate(3.456)).toBe("3.46/s");
    expect(formatRate(null)).toBe("–");
    expect(formatCost(0.0042)).toBe("$0.0042");
    expect(formatCost(12.5)).toBe("$12.50");
    expect(formatCost(0)).toBe("$0");
    expect(formatCost(null)).toBe("–");
    expect(formatDuration(4.5)).toBe("4.5 s");
    expect(formatDuration(185)).toBe("3 min 5 s");
    expect(formatDuration(7440)).toBe("2 h 4 min");
    expect(formatDuration(null)).toBe("–");
    expect(formatTimestamp("2026-12-03T23:09:05.123")).toBe("2026-12-03 23:09:05 UTC");
    expect(formatTimestamp(null)).toBe("–");
  });
});

describe("spans", () => {
  it("measures a finished run, and a running one up to now", () => {
    expect(runSpan({ started_at: "2026-01-01T00:00:00", finished_at: "2026-01-01T00:01:30" }, 0).seconds).toBe(90);
    const now = Date.parse("2026-01-01T00:00:10Z");
    expect(runSpan({ started_at: "2026-01-01T00:00:00", finished_at: null }, now).seconds).toBe(10);
    expect(runSpan({ started_at: null, finished_at: null }, now).seconds).toBeNull();
  });

  it("derives a round's start from its finish and duration", () => {
    const span = roundSpan({ duration_s: 2.5, finished_at: "2026-01-01T00:00:10" });
    expect(span.started).toBe("2026-01-01T00:00:07.500Z");
    expect(span.seconds).toBe(2.5);
    expect(roundSpan({ duration_s: 1 }).started).toBeNull();
  });
});
