import { describe, expect, it } from "vitest";
import type { SimulationDetail } from "../api/types";
import { cliFile, configYaml, toYaml, withoutNulls } from "./configFile";

describe("toYaml", () => {
  it("writes nested mappings and sequences as block YAML", () => {
    expect(toYaml({ rule: { preset: "2/3", min: 0 }, segment_by: ["education", "region"], policy: { endpoints: [{ base_url: "http://h:1/v1", model: "m" }] } })).toBe(
      [
        "rule:",
        '  preset: "2/3"',
        "  min: 0",
        "segment_by:",
        "  - education",
        "  - region",
        "policy:",
        "  endpoints:",
        '    - base_url: "http://h:1/v1"',
        "      model: m",
        "",
      ].join("\n"),
    );
  });

  it("quotes what YAML 1.1 would misread and keeps empty containers", () => {
    expect(toYaml({ a: "yes", b: "on", c: "12", d: "x: y", e: "line\nbreak", f: [], g: {}, h: null, i: true, "high school": 1 })).toBe(
      ['a: "yes"', 'b: "on"', 'c: "12"', 'd: "x: y"', 'e: "line\\nbreak"', "f: []", "g: {}", "h: null", "i: true", '"high school": 1', ""].join("\n"),
    );
    expect(toYaml({ big: 1e21, small: 0.5 })).toBe("big: 1.0e+21\nsmall: 0.5\n");
    expect(toYaml({ s: "a\u2028b\u0085" })).toBe('s: "a\\u2028b\\u0085"\n');
  });
});

describe("config files", () => {
  const simulation = {
    id: 7,
    name: "synthetic, 3 rounds",
    population_id: 2,
    rounds: 3,
    seed: "9223372036854775807",
    config: { population_id: 2, name: null, rounds: 3, seed: "9223372036854775807", rule: { preset: "2/3", ratio: null }, policy: { kind: "synthetic", latency_s: 0 } },
  } as unknown as SimulationDetail;

  it("writes the seed as a bare integer without losing digits", () => {
    expect(configYaml(simulation.config)).toContain("seed: 9223372036854775807\n");
    expect(configYaml(simulation.config)).toContain("name: null\n");
  });

  it("makes a file for populace simulate: no nulls, the run's population, rounds and seed", () => {
    const text = cliFile(simulation);
    expect(text.startsWith("# Simulation 7 (synthetic, 3 rounds)")).toBe(true);
    expect(text).toContain("population_id: 2\n");
    expect(text).toContain("rounds: 3\n");
    expect(text).toContain("seed: 9223372036854775807\n");
    expect(text).not.toContain("null");
    expect(text).toContain('rule:\n  preset: "2/3"\n');
  });

  it("drops nulls deep down", () => {
    expect(withoutNulls({ a: null, b: { c: null, d: 1 }, e: [{ f: null }] })).toEqual({ b: { d: 1 }, e: [{}] });
  });
});
