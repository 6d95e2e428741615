import { describe, expect, it } from "vitest";
import { pageParam, pageRows, parsePage } from "./paging";

describe("paging", () => {
  it("reads ?page= leniently", () => {
    expect(parsePage(null)).toBe(1);
    expect(parsePage("3")).toBe(3);
    expect(parsePage("0")).toBe(1);
    expect(parsePage("2.5")).toBe(1);
    expect(parsePage("x")).toBe(1);
  });

  it("slices the page and clamps past the end", () => {
    expect(pageRows(120, 2, 50)).toEqual({ page: 2, pages: 3, start: 50, end: 100 });
    expect(pageRows(120, 9, 50)).toEqual({ page: 3, pages: 3, start: 100, end: 120 });
    expect(pageRows(0, 4, 50)).toEqual({ page: 1, pages: 1, start: 0, end: 0 });
  });

  it("keeps page 1 out of the URL", () => {
    expect(pageParam(1)).toBeNull();
    expect(pageParam(4)).toBe("4");
  });
});
