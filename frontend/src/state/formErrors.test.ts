import { describe, expect, it } from "vitest";
import { didYouMean, numberText, phraseIssue } from "./formErrors";

const rounds = { label: "Rounds", minimum: 1, maximum: 1000, integer: true };

describe("phraseIssue", () => {
  it("says a range in the form's words, the other bound from the field", () => {
    expect(phraseIssue({ loc: ["body", "rounds"], msg: "Input should be less than or equal to 1000", type: "less_than_equal" }, rounds)).toBe(
      "Rounds must be between 1 and 1,000",
    );
    expect(phraseIssue({ loc: ["body", "rounds"], msg: "Input should be greater than or equal to 1", type: "greater_than_equal" }, rounds)).toBe(
      "Rounds must be between 1 and 1,000",
    );
    // Without the field's facts, the message's own bound.
    expect(phraseIssue({ loc: ["x"], msg: "Input should be greater than or equal to 0", type: "greater_than_equal" }, { label: "Noise (std)" })).toBe(
      "Noise (std) must be at least 0",
    );
    expect(phraseIssue({ loc: ["m"], msg: "Input should be greater than 0", type: "greater_than" }, { label: "Multiplier", exclusiveMinimum: 0, maximum: 1000 })).toBe(
      "Multiplier must be more than 0 and at most 1,000",
    );
  });

  it("uses ctx when a client has it", () => {
    expect(phraseIssue({ loc: ["n"], msg: "whatever", type: "greater_than_equal", ctx: { ge: 2 } }, { label: "Group size", maximum: 100000 })).toBe(
      "Group size must be between 2 and 100,000",
    );
  });

  it("reads pydantic's message wrapped in a check of the manager's (plugin params, sweep points)", () => {
    expect(
      phraseIssue({ loc: ["body", "policy", "params", "first"], msg: "Input should be less than or equal to 1", type: "simulation_config" }, { label: "First round", minimum: 0, maximum: 1 }),
    ).toBe("First round must be between 0 and 1");
    expect(
      phraseIssue(
        { loc: ["grid", "seed", 1], msg: 'Input should be a valid integer, unable to parse string as an integer (at point 2 (seed="a"))', type: "simulation_config" },
        { label: "grid.seed[1]" },
      ),
    ).toBe('grid.seed[1] must be a whole number (at point 2 (seed="a"))');
  });

  it("says a whole number, a number, required, a choice", () => {
    expect(phraseIssue({ loc: ["rounds"], msg: "Input should be a valid integer, unable to parse string as an integer", type: "int_parsing" }, rounds)).toBe(
      "Rounds must be a whole number",
    );
    expect(phraseIssue({ loc: ["rounds"], msg: "Input should be a valid integer, got a number with a fractional part", type: "int_from_float" }, rounds)).toBe(
      "Rounds must be a whole number",
    );
    expect(phraseIssue({ loc: ["t"], msg: "Input should be a valid number, unable to parse string as a number", type: "float_parsing" }, { label: "Temperature" })).toBe(
      "Temperature must be a number",
    );
    expect(phraseIssue({ loc: ["rounds"], msg: "Field required", type: "missing" }, rounds)).toBe("Rounds is required");
    expect(phraseIssue({ loc: ["mode"], msg: "Input should be 'sequence' or 'parallel'", type: "literal_error" }, { label: "mode" })).toBe(
      "mode must be one of 'sequence' or 'parallel'",
    );
    expect(phraseIssue({ loc: ["name"], msg: "String should have at least 1 character", type: "string_too_short" }, { label: "Name" })).toBe("Name must not be empty");
  });

  it("names an unknown field and the one it was probably meant to be", () => {
    const known = ["population_id", "name", "rounds", "seed"];
    expect(phraseIssue({ loc: ["body", "rouns"], msg: "Extra inputs are not permitted", type: "extra_forbidden" }, { label: "", knownKeys: known })).toBe(
      "unknown field 'rouns' — did you mean 'rounds'?",
    );
    expect(phraseIssue({ loc: ["base", "sede"], msg: "Extra inputs are not permitted", type: "extra_forbidden" }, { label: "base", knownKeys: known })).toBe(
      "unknown field 'sede' in base — did you mean 'seed'?",
    );
    expect(phraseIssue({ loc: ["zzz"], msg: "Extra inputs are not permitted", type: "extra_forbidden" }, { label: "", knownKeys: ["a", "b"] })).toBe(
      "unknown field 'zzz' (known: a, b)",
    );
  });

  it("keeps the manager's own sentences after the field's label", () => {
    expect(phraseIssue({ loc: ["body", "population_id"], msg: "population 7 is busy", type: "value_error" }, { label: "Population" })).toBe(
      "Population: population 7 is busy",
    );
    expect(phraseIssue({ loc: ["x"], msg: "Value error, weights sum to 0.8, not 1", type: "value_error" }, { label: "distributions[0].categories" })).toBe(
      "distributions[0].categories: weights sum to 0.8, not 1",
    );
    // A sentence that names the field by its key says the label instead.
    expect(phraseIssue({ loc: ["body", "policy", "endpoints", 0, "base_url"], msg: "base_url must be an http(s) URL, got 'ftp://x'", type: "simulation_config" }, { label: "Endpoint 1 URL" })).toBe(
      "Endpoint 1 URL must be an http(s) URL, got 'ftp://x'",
    );
  });
});

describe("numberText and didYouMean", () => {
  it("groups digits as the forms show them", () => {
    expect(numberText("1000")).toBe("1,000");
    expect(numberText("1000000.0")).toBe("1,000,000");
    expect(numberText("9223372036854775807")).toBe("9,223,372,036,854,775,807");
    expect(numberText(0.5)).toBe("0.5");
    expect(numberText("-1000000.0")).toBe("-1,000,000");
  });

  it("suggests only a near key", () => {
    expect(didYouMean("rouns", ["rounds", "name"])).toBe("rounds");
    expect(didYouMean("polciy", ["policy", "plugin"])).toBe("policy");
    expect(didYouMean("colour", ["rounds", "name"])).toBeNull();
  });
});
