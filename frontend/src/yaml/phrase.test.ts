import { describe, expect, it } from "vitest";
import { describedAt, phraseFileIssue } from "./phrase";

const OPENAPI = {
  components: {
    schemas: {
      SimulationConfig: {
        properties: {
          rounds: { maximum: 1000, minimum: 1, type: "integer" },
          seed: { anyOf: [{ minimum: 0, type: "integer" }, { type: "null" }] },
          name: { type: "string" },
        },
        type: "object",
      },
      SweepConfig: {
        properties: { name: { type: "string" }, mode: { enum: ["sequence", "parallel"] }, base: { type: "object", additionalProperties: true }, grid: { type: "object" } },
        type: "object",
      },
      PopulationConfig: { properties: { name: { type: "string" }, size: { minimum: 1, maximum: 1000000, type: "integer" }, seed: { type: "integer" } }, type: "object" },
    },
  },
};

describe("phraseFileIssue", () => {
  it("says a population's range and unknown keys in words", () => {
    expect(phraseFileIssue({ loc: ["body", "size"], msg: "Input should be greater than or equal to 1", type: "greater_than_equal" }, OPENAPI, "PopulationConfig")).toBe(
      "size must be between 1 and 1,000,000",
    );
    expect(phraseFileIssue({ loc: ["body", "sise"], msg: "Extra inputs are not permitted", type: "extra_forbidden" }, OPENAPI, "PopulationConfig")).toBe(
      "unknown field 'sise' — did you mean 'size'?",
    );
  });

  it("reads a sweep's base and grid as simulation config fields", () => {
    expect(phraseFileIssue({ loc: ["body", "base", "rouns"], msg: "Extra inputs are not permitted (at point 1 (seed=1))", type: "simulation_config" }, OPENAPI, "SweepConfig")).toBe(
      "unknown field 'rouns' in base — did you mean 'rounds'? (at point 1 (seed=1))",
    );
    expect(phraseFileIssue({ loc: ["body", "base", "rounds"], msg: "Input should be less than or equal to 1000 (at point 1 (seed=1))", type: "simulation_config" }, OPENAPI, "SweepConfig")).toBe(
      "base.rounds must be between 1 and 1,000 (at point 1 (seed=1))",
    );
    expect(
      phraseFileIssue({ loc: ["body", "grid", "seed", 1], msg: 'Input should be a valid integer, unable to parse string as an integer (at point 2 (seed="a"))', type: "simulation_config" }, OPENAPI, "SweepConfig"),
    ).toBe('grid.seed[1] must be a whole number (at point 2 (seed="a"))');
    expect(describedAt("SweepConfig", ["grid", "policy.latency_s", 0])).toEqual({ model: "SimulationConfig", loc: ["policy", "latency_s"] });
  });

  it("keeps the manager's own sentences, and works without the schema", () => {
    expect(phraseFileIssue({ loc: ["body", "distributions", 0, "categories"], msg: "weights sum to 0.8, not 1", type: "value_error" }, null, "PopulationConfig")).toBe(
      "distributions[0].categories: weights sum to 0.8, not 1",
    );
    expect(phraseFileIssue({ loc: ["body", "size"], msg: "Input should be greater than or equal to 1", type: "greater_than_equal" }, null, "PopulationConfig")).toBe("size must be at least 1");
  });
});
