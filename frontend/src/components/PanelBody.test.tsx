// @vitest-environment happy-dom
import { act } from "react";
import { createRoot, type Root } from "react-dom/client";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { NetworkError } from "../api/client";
import { usePanel } from "../hooks/usePanel";
import { PanelBody } from "./PanelBody";

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

/** Loads answered by the test: each call takes the next queued answer. */
function Rounds({ load }: { load: () => Promise<string[]> }) {
  const panel = usePanel(() => load(), [], { failure: "Could not load the rounds", onUnauthorized: vi.fn() });
  return (
    <PanelBody panel={panel} loading="Loading the rounds…">
      {(rounds) => <ul>{rounds.map((r) => <li key={r}>{r}</li>)}</ul>}
    </PanelBody>
  );
}

describe("a panel loading, failing and retried", () => {
  it("shows a skeleton, then the reason with a Retry, then the data once the API answers", async () => {
    let fail!: (err: unknown) => void;
    let answer!: (rounds: string[]) => void;
    const load = vi
      .fn<() => Promise<string[]>>()
      .mockImplementationOnce(() => new Promise((_, no) => (fail = no)))
      .mockImplementationOnce(() => new Promise((yes) => (answer = yes)));
    await act(async () => root.render(<Rounds load={load} />));
    expect(container.querySelector('[role="status"]')?.getAttribute("aria-label")).toBe("Loading the rounds…");
    expect(container.textContent).not.toContain("Retry");

    await act(async () => fail(new NetworkError("Cannot reach the manager (Failed to fetch)")));
    const alert = container.querySelector('[role="alert"]');
    expect(alert?.textContent).toContain("Could not load the rounds: Cannot reach the manager (Failed to fetch)");
    expect(container.querySelector('[role="status"]')).toBeNull();

    await act(async () => alert?.querySelector("button")?.click());
    expect(load).toHaveBeenCalledTimes(2);
    expect(container.querySelector('[role="alert"]')).toBeNull(); // loading again: the skeleton
    expect(container.querySelector('[aria-busy="true"]')).not.toBeNull();

    await act(async () => answer(["round 1", "round 2"]));
    expect([...container.querySelectorAll("li")].map((li) => li.textContent)).toEqual(["round 1", "round 2"]);
    expect(container.querySelector('[role="alert"]')).toBeNull();
  });
});
