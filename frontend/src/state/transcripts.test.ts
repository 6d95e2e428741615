import { describe, expect, it } from "vitest";
import { serializeQuery } from "../api/typedApi";
import { agentTranscriptQuery, cursorOf, EMPTY_FILTERS, filterProblems, filtersFromSearch, filtersToParams, promptText, segmentOptions, transcriptQuery } from "./transcripts";

describe("filters in the URL", () => {
  it("round-trips through the query string, dropping unknown statuses", () => {
    const filters = { round: "3", status: "invalid" as const, attribute: "education:phd", min: "", max: "50" };
    const params = filtersToParams(filters);
    expect(params).toEqual({ t_round: "3", t_status: "invalid", t_attribute: "education:phd", t_min: null, t_max: "50" });
    const search = new URLSearchParams(Object.entries(params).filter((e): e is [string, string] => e[1] !== null)).toString();
    expect(filtersFromSearch(`?${search}&round=7`)).toEqual(filters);
    expect(filtersFromSearch("?t_status=bogus").status).toBe("");
  });
});

describe("checks", () => {
  it("names the field that is wrong", () => {
    expect(filterProblems(EMPTY_FILTERS)).toEqual({});
    expect(filterProblems({ ...EMPTY_FILTERS, round: "x" })).toHaveProperty("round");
    expect(filterProblems({ ...EMPTY_FILTERS, min: "a" })).toHaveProperty("min");
    expect(filterProblems({ ...EMPTY_FILTERS, min: "60", max: "10" })).toEqual({ max: "at least the minimum" });
    expect(filterProblems({ ...EMPTY_FILTERS, attribute: "education" })).toHaveProperty("attribute");
  });
});

describe("queries", () => {
  it("sends only the filters set, the cursor and the page size", () => {
    // As the typed client sends it; the cursor is the id of the last agent of the page before.
    const wire = (query: Record<string, unknown>) => `?${serializeQuery(query)}`;
    expect(wire(transcriptQuery(EMPTY_FILTERS, null, 20))).toBe("?limit=20");
    expect(wire(transcriptQuery({ ...EMPTY_FILTERS, status: "late", attribute: "education:high school", min: "0" }, "17", 50))).toBe(
      "?status=late&attribute=education%3Ahigh+school&min=0&after=17&limit=50",
    );
    expect(wire(agentTranscriptQuery(4, null, 10))).toBe("?simulation_id=4&limit=10");
    expect(wire(agentTranscriptQuery(4, "9", 10))).toBe("?simulation_id=4&after=9&limit=10");
    expect(cursorOf(12)).toBe("12");
    expect(cursorOf(null)).toBeNull();
  });

  it("offers every category of every distribution as a segment", () => {
    expect(segmentOptions({ region: { south: 3, north: 1 }, age: { "10": 1, "9": 2 } }).map((o) => o.value)).toEqual([
      "age:9",
      "age:10",
      "region:north",
      "region:south",
    ]);
    expect(segmentOptions(null)).toEqual([]);
  });
});

describe("promptText", () => {
  it("shows chat messages by role, a string as is, anything else as JSON", () => {
    expect(promptText([{ role: "system", content: "Be brief." }, { role: "user", content: "Guess." }])).toBe("system:\nBe brief.\n\nuser:\nGuess.");
    expect(promptText("Guess a number")).toBe("Guess a number");
    expect(promptText({ a: 1 })).toBe('{\n  "a": 1\n}');
    expect(promptText(null)).toBe("");
  });
});
