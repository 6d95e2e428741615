import { describe, expect, it } from "vitest";
import type { Population } from "../api/types";
import { knownFromList, populationLabel } from "./PopulationName";

function population(id: number, status: Population["status"] = "deployed"): Population {
  return { id, name: `study-${id}`, size: 1000, hosted: 1000, seed: "1", status, counts: null, error: null, dedicated_process: false, graph: null, created_at: "", updated_at: "" };
}

describe("knownFromList", () => {
  it("maps listed ids to their rows and unlisted wanted ids to missing", () => {
    const known = knownFromList([population(3), population(5)], false, [3, 7]);
    expect(known.get(3)).toMatchObject({ id: 3 });
    expect(known.get(7)).toBe("missing");
  });

  it("leaves unlisted ids unknown when the list was truncated", () => {
    const known = knownFromList([population(3)], true, [3, 7]);
    expect(known.has(7)).toBe(false);
  });
});

describe("populationLabel", () => {
  it("names a population, a deleted one, a missing one and one not loaded yet", () => {
    expect(populationLabel(population(3), 3)).toBe("study-3");
    expect(populationLabel(population(3, "deleted"), 3)).toBe("study-3 (deleted)");
    expect(populationLabel("missing", 7)).toBe("population 7 (deleted)");
    expect(populationLabel(undefined, 7)).toBe("#7");
  });
});
