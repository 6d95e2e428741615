import { describe, expect, it } from "vitest";
import { agentBrowserParams, readAgentBrowserUrl } from "./AgentBrowser";

describe("the agent browser's URL", () => {
  it("round-trips filters, the page and its cursor", () => {
    const state = { worker: "2", attribute: "occupation", value: "game theory: professor", page: 3, after: 4294967345, from: null };
    const params = agentBrowserParams(state);
    expect(params).toEqual({ worker: "2", attr: "occupation:game theory: professor", page: "3", after: "4294967345", from: null });
    const search = `?${new URLSearchParams(Object.entries(params).filter((e): e is [string, string] => e[1] !== null)).toString()}`;
    expect(readAgentBrowserUrl(search)).toEqual(state);
  });

  it("keeps page 1 and empty filters out of the URL, and reads a jump", () => {
    expect(agentBrowserParams({ worker: "", attribute: "", value: "", page: 1, after: null, from: null })).toEqual({
      worker: null,
      attr: null,
      page: null,
      after: null,
      from: null,
    });
    expect(readAgentBrowserUrl("?from=500000")).toMatchObject({ from: 500000, page: 1, after: null });
  });

  it("ignores malformed values", () => {
    expect(readAgentBrowserUrl("?worker=x&attr=nocolon&page=2.5&after=abc&from=0")).toEqual({
      worker: "",
      attribute: "",
      value: "",
      page: 1,
      after: null,
      from: null,
    });
  });
});
