import { describe, expect, it } from "vitest";
import { formatLoc, lineFromMessage, locateInYaml } from "./locate";

const CONFIG = `# a study
name: education-study
size: 1000
seed: 7
distributions:
  - name: education   # first
    categories:
      - {name: high school, weight: 0.5}
      - name: doctorate
        weight: 0.2
  - name: occupation
    given: education
    conditional:
      "high school": [{name: clerk, weight: 1.0}]
      doctorate:
        - {name: game theory professor, weight: 1.0}
persona:
  mode: template
  template: |
    You are a {occupation}.
    size: not a key
  metaprompt: "x: y # not a comment"
`;

describe("locateInYaml", () => {
  it.each([
    [["body", "name"], 2],
    [["body", "size"], 3],
    [["body", "distributions"], 5],
    [["body", "distributions", 0], 6],
    [["body", "distributions", 0, "name"], 6],
    [["body", "distributions", 0, "categories"], 7],
    [["body", "distributions", 0, "categories", 0], 8],
    [["body", "distributions", 0, "categories", 0, "weight"], 8],
    [["body", "distributions", 0, "categories", 1, "weight"], 10],
    [["body", "distributions", 1, "given"], 12],
    [["body", "distributions", 1, "conditional", "high school", 0, "name"], 14],
    [["body", "distributions", 1, "conditional", "doctorate", 0], 16],
    [["body", "persona", "template"], 19],
    [["body", "persona", "metaprompt"], 22],
  ])("finds %j on line %i", (loc, line) => {
    expect(locateInYaml(CONFIG, loc)).toEqual({ line, exact: true });
  });

  it("falls back to the deepest part that exists (a missing or misspelt field)", () => {
    expect(locateInYaml(CONFIG, ["body", "distributions", 0, "categories", 0, "wieght"])).toEqual({ line: 8, exact: false });
    expect(locateInYaml(CONFIG, ["body", "distributions", 5])).toEqual({ line: 5, exact: false });
    expect(locateInYaml(CONFIG, ["body", "nope"])).toEqual({ line: null, exact: false });
  });

  it("does not take text inside a block scalar for keys", () => {
    // "size: not a key" in the template must not shadow the real size, nor end the persona mapping.
    expect(locateInYaml(CONFIG, ["size"]).line).toBe(3);
    expect(locateInYaml(CONFIG, ["persona", "metaprompt"]).line).toBe(22);
  });

  it("reads a sequence at its mapping's own indentation and nested flow over lines", () => {
    const text = ["distributions:", "- name: a", "  categories: [", "    {name: x, weight: 1},", "    {name: y,", "     weight: 0}]", "persona: {template: hi}"].join("\n");
    expect(locateInYaml(text, ["distributions", 0, "categories", 1])).toEqual({ line: 5, exact: true });
    expect(locateInYaml(text, ["distributions", 0, "categories", 1, "weight"])).toEqual({ line: 6, exact: true });
    expect(locateInYaml(text, ["persona", "template"])).toEqual({ line: 7, exact: true });
  });

  it("reads JSON", () => {
    const text = '{\n  "name": "x",\n  "distributions": [\n    {"name": "a",\n     "categories": []}\n  ]\n}';
    expect(locateInYaml(text, ["body", "distributions", 0, "categories"])).toEqual({ line: 5, exact: true });
    expect(locateInYaml(text, ["name"])).toEqual({ line: 2, exact: true });
  });

  it("survives text that is not YAML at all", () => {
    expect(locateInYaml("", ["name"])).toEqual({ line: null, exact: false });
    expect(locateInYaml("{[}}:: - -", ["name"]).exact).toBe(false);
    expect(locateInYaml("just a string", ["name"])).toEqual({ line: null, exact: false });
  });
});

describe("formatLoc", () => {
  it("writes a path a person can read", () => {
    expect(formatLoc(["body", "distributions", 0, "categories"])).toBe("distributions[0].categories");
    expect(formatLoc(["body", "distributions", 1, "conditional", "high school", 0])).toBe(
      'distributions[1].conditional["high school"][0]',
    );
    expect(formatLoc(["body"])).toBe("(document)");
  });
});

describe("lineFromMessage", () => {
  it("takes the line from a syntax error", () => {
    expect(lineFromMessage("(document): line 2, column 7: mapping values are not allowed here")).toBe(2);
    expect(lineFromMessage("Field required")).toBeNull();
  });
});
