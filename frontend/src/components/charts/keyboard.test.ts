import { describe, expect, it } from "vitest";
import { describePoint, stepIndex } from "./keyboard";

describe("stepIndex", () => {
  it("starts at the latest point, or the first with Home", () => {
    expect(stepIndex(5, null, "ArrowLeft")).toBe(4);
    expect(stepIndex(5, null, "ArrowRight")).toBe(4);
    expect(stepIndex(5, null, "Home")).toBe(0);
  });

  it("steps by one, ten, or to either end, and stops at the ends", () => {
    expect(stepIndex(5, 2, "ArrowLeft")).toBe(1);
    expect(stepIndex(5, 2, "ArrowRight")).toBe(3);
    expect(stepIndex(5, 4, "ArrowRight")).toBe(4);
    expect(stepIndex(5, 0, "ArrowLeft")).toBe(0);
    expect(stepIndex(50, 5, "PageDown")).toBe(15);
    expect(stepIndex(50, 5, "PageUp")).toBe(0);
    expect(stepIndex(50, 5, "End")).toBe(49);
    expect(stepIndex(50, 5, "Home")).toBe(0);
  });

  it("ignores other keys and has nowhere to go without points", () => {
    expect(stepIndex(5, 2, "Tab")).toBeUndefined();
    expect(stepIndex(0, null, "ArrowLeft")).toBeNull();
  });
});

describe("describePoint", () => {
  const data = [
    [1, 2, 3],
    [50.256, 40, 30],
    [33.5, null, 20],
  ];

  it("names the point by x and lists each series' value there", () => {
    expect(describePoint(data, [{ label: "Round" }, { label: "Mean" }, { label: "Target" }], 0)).toBe("Round 1: Mean 50.26, Target 33.5");
  });

  it("leaves out a series without a value, and formats with the series' own format", () => {
    const pct = { label: "Share", format: (v: number) => `${v} %` };
    expect(describePoint(data, [{ label: "Round" }, pct, { label: "Target" }], 1)).toBe("Round 2: Share 40 %");
    expect(describePoint([[1], [null]], [{ label: "Round" }, { label: "Mean" }], 0)).toBe("Round 1: no values");
  });
});
