import { describe, expect, it } from "vitest";
import type { SimulationRound } from "../api/types";
import { pageHolding, parseAfter, roundsPage } from "./roundPages";

const rounds = Array.from({ length: 120 }, (_, i) => ({ round: i + 1 }) as SimulationRound);

describe("roundsPage", () => {
  it("pages by the last round before the page", () => {
    const first = roundsPage(rounds, null, 50);
    expect(first.items.map((r) => r.round).slice(0, 2)).toEqual([1, 2]);
    expect(first.previous).toBeUndefined();
    expect(first.next).toBe(50);
    const second = roundsPage(rounds, 50, 50);
    expect(second.first).toBe(51);
    expect(second.previous).toBeNull();
    expect(second.next).toBe(100);
    const last = roundsPage(rounds, 100, 50);
    expect(last.items).toHaveLength(20);
    expect(last.next).toBeNull();
    expect(last.previous).toBe(50);
  });

  it("shows everything on one page for a short run", () => {
    const page = roundsPage(rounds.slice(0, 10), null, 50);
    expect(page.items).toHaveLength(10);
    expect(page.next).toBeNull();
  });

  it("finds the page holding a round", () => {
    expect(pageHolding(rounds, 10, 50)).toBeNull();
    expect(pageHolding(rounds, 51, 50)).toBe(50);
    expect(pageHolding(rounds, 120, 50)).toBe(100);
    expect(parseAfter("50")).toBe(50);
    expect(parseAfter("x")).toBeNull();
    expect(parseAfter(null)).toBeNull();
  });
});
