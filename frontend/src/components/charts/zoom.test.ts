import { describe, expect, it } from "vitest";
import { extent, forLogScale, zoomRange } from "./zoom";

describe("chart zoom", () => {
  it("zooms in around the middle and out up to the full range", () => {
    expect(zoomRange([1, 21], [1, 21], 0.5)).toEqual([6, 16]);
    expect(zoomRange([6, 16], [1, 21], 2)).toEqual([1, 21]);
    expect(zoomRange([1, 21], [1, 21], 4)).toEqual([1, 21]);
  });

  it("stays inside the data and keeps a minimum span", () => {
    expect(zoomRange([1, 5], [1, 21], 2)).toEqual([1, 9]); // would start before round 1
    expect(zoomRange([17, 21], [1, 21], 2)).toEqual([13, 21]);
    expect(zoomRange([10, 11], [1, 21], 0.1, 1)).toEqual([10, 11]);
  });

  it("finds the x extent and blanks non-positive values for a log axis", () => {
    expect(extent([3, 1, null, 7])).toEqual([1, 7]);
    expect(extent([])).toBeNull();
    expect(forLogScale([[1, 2, 3], [0, 5, -1]])).toEqual([[1, 2, 3], [null, 5, null]]);
  });
});
