// @vitest-environment happy-dom
import { act } from "react";
import { createRoot, type Root } from "react-dom/client";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { type ApiClient, NetworkError } from "../api/client";
import { AgentBrowser } from "./AgentBrowser";

(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true;

let container: HTMLDivElement;
let root: Root;
beforeEach(() => {
  container = document.createElement("div");
  document.body.append(container);
  root = createRoot(container);
});
afterEach(() => {
  act(() => root.unmount());
  container.remove();
});

function browse(agentsPage: ApiClient["agentsPage"], deploying: boolean) {
  const client = { agentsPage } as unknown as ApiClient;
  return act(async () =>
    root.render(<AgentBrowser client={client} populationId={1} workerIds={[]} categories={{}} reloadKey={0} deploying={deploying} onUnauthorized={vi.fn()} />),
  );
}

const text = () => container.textContent ?? "";

describe("the agent table's states", () => {
  it("says the agents come once deployed, not that none match, while a deploy runs", async () => {
    await browse(vi.fn().mockResolvedValue({ items: [], next_after: null }), true);
    expect(text()).toContain("The agents show here once the deploy has stored them.");
    expect(text()).not.toContain("No agents match.");
  });

  it("shows skeleton rows until the page arrives, then says when none match", async () => {
    let answer!: (page: { items: never[]; next_after: null }) => void;
    await browse(vi.fn(() => new Promise((yes) => (answer = yes))) as unknown as ApiClient["agentsPage"], false);
    expect(container.querySelectorAll("tr.skeleton-row").length).toBeGreaterThan(0);
    expect(text()).not.toContain("No agents match.");
    await act(async () => answer({ items: [], next_after: null }));
    expect(container.querySelectorAll("tr.skeleton-row")).toHaveLength(0);
    expect(text()).toContain("No agents match.");
  });

  it("shows why a page failed, and Retry asks for it again", async () => {
    const agentsPage = vi
      .fn()
      .mockRejectedValueOnce(new NetworkError("Cannot reach the manager (Failed to fetch)"))
      .mockResolvedValueOnce({ items: [], next_after: null });
    await browse(agentsPage, false);
    const alert = container.querySelector('[role="alert"]');
    expect(alert?.textContent).toContain("Could not load agents: Cannot reach the manager (Failed to fetch)");
    await act(async () => alert?.querySelector("button")?.click());
    expect(agentsPage).toHaveBeenCalledTimes(2);
    expect(container.querySelector('[role="alert"]')).toBeNull();
    expect(text()).toContain("No agents match.");
  });
});
