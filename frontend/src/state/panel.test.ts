import { describe, expect, it } from "vitest";
import { ApiError, NetworkError } from "../api/client";
import { type PanelState, failureText, initialPanel, isUnreachable, panelReducer, panelView } from "./panel";

describe("a panel's states", () => {
  it("shows a skeleton until the first answer, then the data", () => {
    let state: PanelState<number[]> = initialPanel();
    expect(panelView(state)).toBe("skeleton");
    state = panelReducer(state, { type: "loaded", data: [1, 2] });
    expect(panelView(state)).toBe("data");
    expect(state.data).toEqual([1, 2]);
  });

  it("shows the reason of a failure, and Retry goes back to loading, then to the data", () => {
    let state: PanelState<string> = initialPanel();
    state = panelReducer(state, { type: "failed", error: "Could not load rounds: HTTP 503", unreachable: true });
    expect(panelView(state)).toBe("error");
    expect(state).toMatchObject({ error: "Could not load rounds: HTTP 503", unreachable: true, data: null });
    state = panelReducer(state, { type: "start" }); // Retry
    expect(panelView(state)).toBe("skeleton");
    expect(state.error).toBeNull();
    state = panelReducer(state, { type: "loaded", data: "rounds" });
    expect(state).toEqual({ phase: "ready", data: "rounds", error: null, unreachable: false });
  });

  it("keeps the data it showed through a refresh and a failed one", () => {
    let state = panelReducer(initialPanel<string>(), { type: "loaded", data: "old" });
    state = panelReducer(state, { type: "start" });
    expect(panelView(state)).toBe("data"); // a refresh: no skeleton over what is shown
    state = panelReducer(state, { type: "failed", error: "Could not load: down", unreachable: false });
    expect(panelView(state)).toBe("error");
    expect(state.data).toBe("old");
  });

  it("tells a manager that did not answer from one that refused", () => {
    expect(isUnreachable(new NetworkError("Cannot reach the manager (Failed to fetch)"))).toBe(true);
    expect(isUnreachable(new ApiError(502, "Bad Gateway"))).toBe(true);
    expect(isUnreachable(new ApiError(404, "not found"))).toBe(false);
    expect(failureText("Could not load sweep 3", new ApiError(500, "boom"))).toBe("Could not load sweep 3: The manager answered HTTP 500: boom");
  });
});
