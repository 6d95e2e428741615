// @vitest-environment happy-dom
import { act } from "react";
import { createRoot, type Root } from "react-dom/client";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Series } from "../../state/history";
import { TimeSeriesChart } from "./TimeSeriesChart";

(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true;

const count = (value: number) => Math.round(value).toLocaleString("en-US");

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

function draw(series: Series) {
  act(() => root.render(<TimeSeriesChart title="Agents" series={series} format={count} bucketS={10} testId="agents" />));
  const part = (name: string) => container.querySelector(`[data-testid="agents-${name}"]`)?.textContent ?? null;
  return { part, canvas: container.querySelector<HTMLElement>(".history-canvas")! };
}

function press(element: HTMLElement, key: string) {
  act(() => {
    element.dispatchEvent(new KeyboardEvent("keydown", { key, bubbles: true }));
  });
}

describe("TimeSeriesChart", () => {
  // The chart: 205,000 agents hosted read "max 500,000" (the axis top).
  const t0 = 1_767_225_600; // 2026-01-01T00:00:00Z
  const agents: Series = { t: [t0, t0 + 10, t0 + 20, t0 + 30], v: [120_000, 205_000, null, 180_000] };

  it("says the data's true maximum, and labels the axes with the round top, 0, and time", () => {
    const { part } = draw(agents);
    expect(part("max")).toBe("max 205,000");
    expect(part("y-axis")).toBe("250,0000"); // the axis top, then 0
    expect(container.querySelector(".history-y-axis")?.children[0]?.textContent).toBe("250,000");
    expect(part("x-axis")).toBe("40 s agonow");
    expect(container.querySelector("svg")?.getAttribute("aria-label")).toBe("Agents: 3 points over the last 40 s, latest 180,000, max 205,000");
  });

  it("has no maximum before any value", () => {
    const { part } = draw({ t: [], v: [] });
    expect(part("max")).toBe("max –");
    expect(part("x-axis")).toBe("waiting for heartbeatsnow");
  });

  it("reads the value of a point from the keyboard, skipping missing ones", () => {
    const { part, canvas } = draw(agents);
    expect(part("readout")).toBe("");
    act(() => canvas.focus());
    expect(part("readout")).toMatch(/^\d\d:\d\d:\d\d: 180,000$/);
    press(canvas, "ArrowLeft"); // the bucket without a value is skipped
    expect(part("readout")).toMatch(/: 205,000$/);
    expect(container.querySelector(".history-dot")).not.toBeNull();
    press(canvas, "Home");
    expect(part("readout")).toMatch(/: 120,000$/);
    press(canvas, "Escape");
    expect(part("readout")).toBe("");
    expect(container.querySelector(".history-dot")).toBeNull();
  });

  it("reads the point nearest the pointer", () => {
    const { part, canvas } = draw(agents);
    canvas.getBoundingClientRect = () => ({ left: 0, top: 0, width: 400, height: 80, right: 400, bottom: 80, x: 0, y: 0, toJSON: () => ({}) });
    // 10 s into the 40 s shown is the second point.
    act(() => {
      canvas.dispatchEvent(new PointerEvent("pointermove", { clientX: 100, clientY: 10, bubbles: true }));
    });
    expect(part("readout")).toMatch(/: 205,000$/);
    act(() => {
      // React makes onPointerLeave from pointerout to outside the element.
      canvas.dispatchEvent(new PointerEvent("pointerout", { bubbles: true, relatedTarget: document.body }));
    });
    expect(part("readout")).toBe("");
  });
});
