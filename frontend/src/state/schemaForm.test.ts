import { describe, expect, it } from "vitest";
import { boundsAt, fieldHint, initialValues, inputBounds, paramsFromValues, rangeHint, schemaAt, schemaFacts, schemaFields, valuesFromParams } from "./schemaForm";

// The built-in public_goods plugin's params, as GET /api/plugins gives them.
const PUBLIC_GOODS = {
  additionalProperties: false,
  properties: {
    endowment: { default: 20, description: "tokens each agent holds every round", maximum: 1000000, minimum: 1, title: "Endowment", type: "integer" },
    multiplier: { default: 2.0, description: "the pot is multiplied by this", exclusiveMinimum: 0, maximum: 1000, title: "Multiplier", type: "number" },
    group_size: { default: 10, maximum: 100000, minimum: 2, title: "Group size", type: "integer" },
  },
  title: "PublicGoodsParams",
  type: "object",
};

// The guessing game's: nested models by $ref, an optional choice, a boolean.
const GUESS = {
  $defs: {
    RuleConfig: {
      properties: {
        preset: { anyOf: [{ enum: ["2/3", "1/2+5"], type: "string" }, { type: "null" }], default: null, title: "Preset" },
        min: { default: 0, minimum: -1e6, maximum: 1e6, type: "number" },
      },
      title: "RuleConfig",
      type: "object",
    },
    FeedbackConfig: { properties: { mean: { default: false, title: "Tell the mean", type: "boolean" } }, title: "FeedbackConfig", type: "object" },
  },
  properties: {
    rule: { $ref: "#/$defs/RuleConfig", title: "Rule" },
    feedback: { $ref: "#/$defs/FeedbackConfig" },
    tags: { type: "array", items: { type: "string" } },
  },
  type: "object",
};

describe("schemaFields", () => {
  it("draws labels, defaults, ranges and help from the schema", () => {
    const { fields, skipped } = schemaFields(PUBLIC_GOODS);
    expect(fields.map((f) => [f.key, f.label, f.kind, f.initial])).toEqual([
      ["endowment", "Endowment", "integer", "20"],
      ["multiplier", "Multiplier", "number", "2"],
      ["group_size", "Group size", "integer", "10"],
    ]);
    expect(skipped).toEqual([]);
    const [endowment, multiplier] = fields;
    expect(endowment!.description).toBe("tokens each agent holds every round");
    expect(inputBounds(endowment!)).toEqual({ min: 1, max: 1000000, step: "1" });
    expect(inputBounds(multiplier!)).toEqual({ max: 1000, step: "any" });
    expect(rangeHint(endowment!)).toBe("1 to 1,000,000");
    expect(rangeHint(multiplier!)).toBe("more than 0, at most 1,000");
    expect(fieldHint(endowment!)).toBe("Tokens each agent holds every round. A whole number, 1 to 1,000,000");
    expect(fieldHint(multiplier!)).toBe("The pot is multiplied by this. More than 0, at most 1,000");
    expect(fieldHint({ ...multiplier!, description: null, exclusiveMinimum: undefined, minimum: -1e6, maximum: 1e6 })).toBe("From -1,000,000 to 1,000,000");
  });

  it("flattens nested models, reads optional choices and booleans, and skips what it cannot draw", () => {
    const { fields, skipped } = schemaFields(GUESS);
    expect(fields.map((f) => [f.key, f.label, f.kind, f.group, f.initial])).toEqual([
      ["rule.preset", "Preset", "choice", "Rule", ""],
      ["rule.min", "Min", "number", "Rule", "0"],
      ["feedback.mean", "Tell the mean", "boolean", "Feedback", "false"],
    ]);
    expect(fields[0]!.choices).toEqual(["2/3", "1/2+5"]);
    expect(skipped).toEqual(["tags"]);
  });
});

describe("values and params", () => {
  const { fields } = schemaFields(GUESS);

  it("sends what is typed, numbers as numbers, and leaves blanks to the defaults", () => {
    const values = { ...initialValues(fields), "rule.preset": "1/2+5", "rule.min": "-5", "feedback.mean": "true" };
    expect(paramsFromValues(fields, values)).toEqual({ rule: { preset: "1/2+5", min: -5 }, feedback: { mean: true } });
    expect(paramsFromValues(fields, { ...values, "rule.min": "", "rule.preset": "" })).toEqual({ feedback: { mean: true } });
    // Not a number: sent as typed, for the manager to name the field.
    expect(paramsFromValues(fields, { ...values, "rule.min": "abc" })).toEqual({ rule: { preset: "1/2+5", min: "abc" }, feedback: { mean: true } });
  });

  it("fills the values back from stored params", () => {
    expect(valuesFromParams(fields, { rule: { preset: "2/3", min: 1 }, feedback: { mean: true } })).toEqual({
      "rule.preset": "2/3",
      "rule.min": "1",
      "feedback.mean": "true",
    });
  });
});

// A slice of the manager's OpenAPI document.
const OPENAPI = {
  components: {
    schemas: {
      SimulationConfig: {
        additionalProperties: false,
        properties: {
          rounds: { maximum: 1000, minimum: 1, title: "Rounds", type: "integer" },
          seed: { anyOf: [{ maximum: 9223372036854775807, minimum: 0, type: "integer" }, { type: "null" }], default: null },
          policy: { oneOf: [{ $ref: "#/components/schemas/LevelK" }, { $ref: "#/components/schemas/Synthetic" }] },
          segment_by: { items: { type: "string", maxLength: 64 }, type: "array" },
        },
        type: "object",
      },
      LevelK: { properties: { kind: { const: "level_k" }, noise_std: { minimum: 0, maximum: 1e6, type: "number" } }, type: "object" },
      Synthetic: { properties: { kind: { const: "synthetic" }, latency_s: { minimum: 0, maximum: 3600, type: "number" } }, type: "object" },
    },
  },
};
const CONFIG = OPENAPI.components.schemas.SimulationConfig;

describe("schemaAt and schemaFacts", () => {
  it("follows refs, unions (by property or by the tag in the loc) and list items", () => {
    expect(schemaAt(OPENAPI, CONFIG, ["policy", "latency_s"])).toMatchObject({ maximum: 3600 });
    expect(schemaAt(OPENAPI, CONFIG, ["policy", "level_k", "noise_std"])).toMatchObject({ minimum: 0 });
    expect(schemaAt(OPENAPI, CONFIG, ["segment_by", 0])).toMatchObject({ maxLength: 64 });
    expect(schemaAt(OPENAPI, CONFIG, ["nope", "deeper"])).toBeNull();
  });

  it("gives a field's range and its siblings' keys", () => {
    expect(schemaFacts(OPENAPI, CONFIG, ["rounds"])).toMatchObject({ minimum: 1, maximum: 1000, integer: true, knownKeys: ["rounds", "seed", "policy", "segment_by"] });
    expect(schemaFacts(OPENAPI, CONFIG, ["seed"])).toMatchObject({ minimum: 0, integer: true });
    expect(schemaFacts(OPENAPI, CONFIG, ["policy", "noise"]).knownKeys).toEqual(["kind", "noise_std", "latency_s"]);
  });

  it("puts the schema's range on an input", () => {
    expect(boundsAt(OPENAPI, "SimulationConfig", ["rounds"])).toEqual({ min: 1, max: 1000, step: "1" });
    expect(boundsAt(OPENAPI, "SimulationConfig", ["policy", "latency_s"])).toEqual({ min: 0, max: 3600, step: "any" });
    expect(boundsAt(null, "SimulationConfig", ["rounds"])).toEqual({});
  });
});
