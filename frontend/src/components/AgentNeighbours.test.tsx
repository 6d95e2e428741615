// @vitest-environment happy-dom
import { act } from "react";
import { createRoot, type Root } from "react-dom/client";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ApiClient } from "../api/client";
import type { Population } from "../api/types";
import { AgentNeighbours } from "./AgentNeighbours";

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

const AGENT = 2 ** 32;
// A hub: 120 neighbours with opinions in [0, 1] (bounded confidence), every third without one.
const NEIGHBOURS = Array.from({ length: 120 }, (_, i) => ({
  id: AGENT + 1 + i,
  number: 1 + i,
  attributes: { group: i % 2 ? "a" : "b" },
  value: i % 3 === 2 ? null : i / 120,
}));

function population(graph: Population["graph"]): Population {
  return { id: 1, name: "hub", size: 121, hosted: 121, seed: "1", status: "deployed", counts: null, error: null, dedicated_process: false, graph, created_at: "", updated_at: "" };
}

const GRAPH = {
  kind: "barabasi_albert",
  nodes: 121,
  edges: 120,
  mean_degree: 1.98,
  min_degree: 1,
  max_degree: 120,
  isolated: 0,
  components: 1,
  largest_component: 121,
  clustering: null,
  degree_histogram: [0, 120, 0, 0, 0, 0, 0, 1],
  cut_fraction: 0,
};

/** The neighbours API paged by id, the population's one run, its plugin: what the client fetches. */
function fakeClient() {
  const json = (body: unknown) => new Response(JSON.stringify(body), { headers: { "Content-Type": "application/json" } });
  const request = vi.fn(async (path: string, _init?: RequestInit) => {
    const url = new URL(path, "http://manager");
    if (url.pathname === `/api/agents/${AGENT}/neighbors`) {
      const after = Number(url.searchParams.get("after") ?? "0");
      const limit = Number(url.searchParams.get("limit"));
      const rest = NEIGHBOURS.filter((n) => n.id > after);
      const items = rest.slice(0, limit);
      return json({ items, next_after: rest.length > limit ? items[items.length - 1]!.id : null });
    }
    if (url.pathname === "/api/plugins/bounded_confidence") return json({ name: "bounded_confidence", action: { kind: "number", low: 0, high: 1 } });
    if (url.pathname === "/api/simulations") return json({ items: [{ id: 3, name: "opinions", plugin: "bounded_confidence" }], next_after: null });
    throw new Error(`unexpected ${path}`);
  });
  return { client: new ApiClient("t", request), request };
}

function show(client: ApiClient, graph: Population["graph"]) {
  return act(async () => root.render(<AgentNeighbours client={client} agentId={AGENT} population={population(graph)} onUnauthorized={vi.fn()} />));
}

const text = () => container.textContent ?? "";
const rows = () => container.querySelectorAll('table[aria-label="Neighbour list"] tbody tr');
const loadMore = () => [...container.querySelectorAll("button")].find((b) => b.textContent === "Load more");

describe("an agent's neighbours", () => {
  it("draws 50 of a hub's neighbours, counts the rest, and shades opinions on a ramp", async () => {
    const { client } = fakeClient();
    await show(client, GRAPH);
    expect(container.querySelector("h2")?.textContent).toBe("Neighbours (120)");
    const svg = container.querySelector('[data-testid="ego-network"]')!;
    expect(svg.querySelectorAll("circle.ego-neighbour")).toHaveLength(50);
    expect(svg.querySelectorAll("circle.ego-no-value")).toHaveLength(16); // i % 3 == 2 below 50
    expect(svg.getAttribute("aria-label")).toBe("Agent 4294967296 and 50 of its neighbours on a circle, 34 with a value; 70 more neighbours not drawn");
    expect(text()).toContain("70 more neighbours not drawn");
    expect(text()).toContain("in the latest round of opinions (bounded_confidence)");
    const legend = container.querySelector('[data-testid="ego-legend"]')!;
    expect(legend.querySelector(".ego-ramp")).not.toBeNull();
    expect(legend.textContent).toContain("no value (16 drawn)");
  });

  it("lists them 50 at a time until there are no more", async () => {
    const { client, request } = fakeClient();
    await show(client, GRAPH);
    expect(rows()).toHaveLength(50);
    expect(text()).toContain("50 neighbours listed, more to load");
    expect(rows()[0]!.textContent).toContain("group: b");
    expect(rows()[2]!.querySelector("td:last-child")?.textContent).toBe("–");
    expect(rows()[1]!.querySelector("td:last-child")?.textContent).toBe((1 / 120).toLocaleString("en-US", { maximumFractionDigits: 4 }));
    await act(async () => loadMore()!.click());
    expect(rows()).toHaveLength(100);
    expect(request).toHaveBeenCalledWith(`/api/agents/${AGENT}/neighbors?limit=50&after=${AGENT + 50}`, expect.anything());
    await act(async () => loadMore()!.click());
    expect(rows()).toHaveLength(120);
    expect(loadMore()).toBeUndefined();
    expect(text()).toContain("120 neighbours listed");
    const ids = [...rows()].map((r) => Number(r.querySelector("a")?.textContent));
    expect(new Set(ids).size).toBe(120);
  });

  it("says a population without a graph has no neighbours, and asks nothing", async () => {
    const { client, request } = fakeClient();
    await show(client, null);
    expect(text()).toContain("Its population has no graph: agents have no neighbours.");
    expect(container.querySelector('[data-testid="ego-network"]')).toBeNull();
    expect(request).not.toHaveBeenCalled();
  });
});
