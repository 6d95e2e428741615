import { describe, expect, it } from "vitest";
import { placeIssues } from "./issues";

const TEXT = `name: study
size: 0
distributions:
  - name: education
    categories:
      - {name: a, weight: 0.5}
`;

describe("placeIssues", () => {
  it("puts each of the manager's 422 issues on its line", () => {
    const placed = placeIssues(TEXT, [
      { loc: ["body", "size"], msg: "Input should be greater than or equal to 1" },
      { loc: ["body", "distributions", 0, "categories"], msg: "weights sum to 0.5, not 1" },
    ]);
    expect(placed).toEqual([
      { line: 2, path: "size", message: "Input should be greater than or equal to 1" },
      { line: 5, path: "distributions[0].categories", message: "weights sum to 0.5, not 1" },
    ]);
  });

  it("names the path when the key itself is missing, at its parent's line", () => {
    const [issue] = placeIssues(TEXT, [{ loc: ["body", "distributions", 0, "categories", 0, "colour"], msg: "Extra inputs are not permitted" }]);
    expect(issue).toEqual({
      line: 6,
      path: "distributions[0].categories[0].colour",
      message: "distributions[0].categories[0].colour: Extra inputs are not permitted",
    });
    expect(placeIssues(TEXT, [{ loc: ["body", "persona"], msg: "Field required" }])).toEqual([
      { line: null, path: "persona", message: "Field required" },
    ]);
  });

  it("takes a syntax error's line from its message", () => {
    expect(
      placeIssues("a: [\n", [{ loc: ["body", "(document)"], msg: "(document): line 2, column 1: expected ',' or ']'" }]),
    ).toEqual([{ line: 2, path: "(document)", message: "line 2, column 1: expected ',' or ']'" }]);
  });

  it("follows its key when lines are inserted above it", () => {
    const issues = [{ loc: ["body", "distributions", 0, "categories"], msg: "bad" }];
    expect(placeIssues(`# new comment\n${TEXT}`, issues)[0]?.line).toBe(6);
  });
});

describe("placeIssues with a phrasing", () => {
  it("words each message, still on its line", () => {
    const placed = placeIssues(TEXT, [{ loc: ["body", "size"], msg: "Input should be greater than or equal to 1" }], (issue) => `${issue.loc[1]} must be at least 1`);
    expect(placed).toEqual([{ line: 2, path: "size", message: "size must be at least 1" }]);
  });
});
