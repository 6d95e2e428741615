import { describe, expect, it } from "vitest";
import { PACE_WINDOW, formatPace, pace } from "./eta";

const MINUTE = 60_000;

describe("pace", () => {
  it("is unknown before two rounds have finished", () => {
    expect(pace([], 10)).toEqual({ roundsPerMinute: null, etaSeconds: null });
    expect(pace([{ round: 1, at: 5 * MINUTE }], 10)).toEqual({ roundsPerMinute: null, etaSeconds: null });
  });

  it("counts rounds per minute and the time left from the finish times", () => {
    const times = [1, 2, 3, 4].map((round) => ({ round, at: round * 30_000 }));
    const p = pace(times, 10);
    expect(p.roundsPerMinute).toBeCloseTo(2);
    // Six rounds left at two a minute.
    expect(p.etaSeconds).toBeCloseTo(180);
  });

  it("uses the run's start for the first round", () => {
    const p = pace([{ round: 1, at: 2 * MINUTE }], 3, 0);
    expect(p.roundsPerMinute).toBeCloseTo(0.5);
    expect(p.etaSeconds).toBeCloseTo(240);
  });

  it("follows the latest rounds only, so a slower spell changes the ETA", () => {
    const fast = Array.from({ length: 20 }, (_, i) => ({ round: i + 1, at: (i + 1) * 1000 }));
    const slowTail = Array.from({ length: PACE_WINDOW + 1 }, (_, i) => ({ round: 21 + i, at: 20_000 + (i + 1) * 10_000 }));
    const p = pace([...fast, ...slowTail], 100);
    expect(p.roundsPerMinute).toBeCloseTo(6);
  });

  it("keeps a replayed round at its latest finish and ignores input order", () => {
    const p = pace(
      [
        { round: 2, at: 2 * MINUTE },
        { round: 1, at: MINUTE },
        { round: 2, at: 3 * MINUTE },
      ],
      4,
    );
    expect(p.roundsPerMinute).toBeCloseTo(0.5);
    expect(p.etaSeconds).toBeCloseTo(240);
  });

  it("has nothing left once the last round finished, and refuses a clock going backwards", () => {
    expect(pace([{ round: 1, at: 0 }, { round: 2, at: MINUTE }], 2).etaSeconds).toBe(0);
    expect(pace([{ round: 1, at: MINUTE }, { round: 2, at: 0 }], 5)).toEqual({ roundsPerMinute: null, etaSeconds: null });
    expect(pace([{ round: 1, at: Number.NaN }, { round: 2, at: MINUTE }], 5).roundsPerMinute).toBeNull();
  });
});

describe("formatPace", () => {
  it("shows a few significant digits", () => {
    expect(formatPace(null)).toBe("–");
    expect(formatPace(2.345)).toBe("2.35 rounds/min");
    expect(formatPace(42.26)).toBe("42.3 rounds/min");
    expect(formatPace(1234.4)).toBe("1,234 rounds/min");
  });
});
