// @vitest-environment happy-dom
import { act } from "react";
import { createRoot, type Root } from "react-dom/client";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ApiError, type ApiClient } from "../api/client";
import type { GroupPage, GroupSeries } from "../api/types";
import type { MetricDeclaration } from "../state/metrics";
import { GroupsPanel } from "./GroupsPanel";

// uPlot draws on a canvas happy-dom lacks: the chart says what it was given instead.
vi.mock("./charts/MetricChart", () => ({
  MetricChart: ({ metric, rounds, testId }: { metric: MetricDeclaration; rounds: Array<{ round: number; metrics: Record<string, number | null> }>; testId: string }) => (
    <div data-testid={testId} data-points={rounds.map((r) => `${r.round}:${r.metrics[metric.name] ?? ""}`).join(",")} />
  ),
}));
const saved: string[] = [];
vi.mock("./saveFile", () => ({ saveBlob: (_blob: Blob, filename: string) => saved.push(filename) }));

(globalThis as { IS_REACT_ACT_ENVIRONMENT?: boolean }).IS_REACT_ACT_ENVIRONMENT = true;

let container: HTMLDivElement;
let root: Root;
beforeEach(() => {
  container = document.createElement("div");
  document.body.append(container);
  root = createRoot(container);
  saved.length = 0;
});
afterEach(() => {
  act(() => root.unmount());
  container.remove();
});

const DECLARED: MetricDeclaration[] = [
  { name: "consensus_round", title: "Consensus reached in round", type: "integer", unit: "", description: "its rounds to consensus" },
  { name: "share_ones", title: "Share of 1s", type: "number", unit: "", description: "" },
];
const GROUPS = 30;

/** 30 cliques; by round r, group g reached consensus in round g % 5 + 1 when that is ≤ r. */
function page(round: number, after: number | null, limit: number, labels = false): GroupPage {
  const start = after === null ? 0 : after + 1;
  const stop = Math.min(GROUPS, start + limit);
  const items = [];
  for (let g = start; g < stop; g++) {
    const reached = (g % 5) + 1;
    items.push({ group: g, label: labels ? `category ${g}` : null, values: { consensus_round: reached <= round ? reached : null, share_ones: reached <= round ? g % 2 : 0.5 } });
  }
  return { round, groups: GROUPS, names: ["consensus_round", "share_ones"], items, next_after: stop < GROUPS ? stop - 1 : null };
}

function series(group: number, rounds: number): GroupSeries {
  return { group, label: null, next_after: null, items: Array.from({ length: rounds }, (_, i) => ({ round: i + 1, values: { consensus_round: null, share_ones: i / rounds } })) };
}

function fakeClient(options: { latest: () => number; none?: boolean; labels?: boolean }) {
  const groupsPage = vi.fn(async (_id: number, q: { round: number | null; after: number | null; limit: number }) => {
    if (options.none) return { round: null, groups: 0, names: [], items: [], next_after: null } satisfies GroupPage;
    if (q.round === 99) throw new ApiError(404, "round 99 kept no group metrics");
    return page(q.round ?? options.latest(), q.after, q.limit, options.labels);
  });
  const groupSeries = vi.fn(async (_id: number, group: number) => series(group, options.latest()));
  const exportGroups = vi.fn(async (_id: number, format: string) => ({ blob: new Blob(["round,group\n"]), filename: `simulation-3-groups.${format}` }));
  return { client: { groupsPage, groupSeries, exportGroups } as unknown as ApiClient, groupsPage, groupSeries, exportGroups };
}

// One callback for every render, as the page passes it.
const onUnauthorized = vi.fn();

function show(client: ApiClient, latestRound: number | null, declared: MetricDeclaration[] | null = DECLARED) {
  const roundNumbers = latestRound === null ? [] : Array.from({ length: latestRound }, (_, i) => i + 1);
  return act(async () => root.render(<GroupsPanel client={client} simulationId={3} roundNumbers={roundNumbers} latestRound={latestRound} declared={declared} onUnauthorized={onUnauthorized} />));
}

const panel = () => container.querySelector('[data-testid="groups"]');
const rows = () => [...container.querySelectorAll('[data-testid="groups-table"] tbody tr')];
const button = (name: string) => [...container.querySelectorAll("button")].find((b) => b.textContent === name || b.getAttribute("aria-label") === name);
const cell = (tr: Element, metric: string) => tr.querySelector(`td[data-metric="${metric}"]`)?.textContent;

describe("the Groups panel", () => {
  it("is absent for a run that keeps no group metrics, and stops asking once a round completed", async () => {
    const { client, groupsPage } = fakeClient({ latest: () => 0, none: true });
    await show(client, null);
    expect(panel()).toBeNull();
    expect(container.textContent).toBe("");
    await show(client, 1);
    expect(groupsPage).toHaveBeenCalledTimes(2);
    await show(client, 2);
    await show(client, 3);
    expect(groupsPage).toHaveBeenCalledTimes(2);
    expect(panel()).toBeNull();
  });

  it("shows the latest round's first page: the count, a column per declared metric and each metric over the page", async () => {
    const { client, groupsPage } = fakeClient({ latest: () => 3 });
    await show(client, 3);
    expect(groupsPage).toHaveBeenLastCalledWith(3, expect.objectContaining({ round: null, after: null, limit: 20 }));
    expect(panel()?.getAttribute("data-round")).toBe("3");
    expect(container.querySelector('[data-testid="group-count"]')?.textContent).toContain("30 groups in round 3; groups 0–19 shown");
    const headers = [...container.querySelectorAll("thead th")].map((th) => th.textContent);
    expect(headers).toEqual(["Group", "Consensus reached in round", "Share of 1s"]);
    expect(rows()).toHaveLength(20);
    expect(cell(rows()[1]!, "consensus_round")).toBe("2");
    expect(cell(rows()[4]!, "consensus_round")).toBe("–"); // round 5 is still to come
    expect(cell(rows()[1]!, "share_ones")).toBe("1");
    const summary = container.querySelector('[data-testid="group-summary"] li[data-metric="consensus_round"]');
    expect(summary?.textContent).toBe("Consensus reached in round: 12 of 20 with a value: min 1, mean 2, max 3");
    // The round selector is labelled and offers every round, the latest first.
    const select = container.querySelector("select")!;
    expect(container.querySelector(`label[for="${select.id}"]`)?.textContent).toBe("Round");
    expect([...select.options].map((o) => o.textContent)).toEqual(["latest (round 3)", "1", "2", "3"]);
  });

  it("pages by keyset: Next asks after the page's last group, Previous goes back", async () => {
    const { client, groupsPage } = fakeClient({ latest: () => 3 });
    await show(client, 3);
    await act(async () => button("Next page")!.click());
    expect(groupsPage).toHaveBeenLastCalledWith(3, expect.objectContaining({ after: 19 }));
    expect(rows().map((r) => r.getAttribute("data-group"))).toEqual(Array.from({ length: 10 }, (_, i) => String(20 + i)));
    expect(button("Next page")!.disabled).toBe(true);
    await act(async () => button("Previous page")!.click());
    expect(rows()[0]!.getAttribute("data-group")).toBe("0");
  });

  it("opens a group's rounds as one chart per metric, and closes them", async () => {
    const { client, groupSeries } = fakeClient({ latest: () => 3 });
    await show(client, 3);
    const open = button("Group 2 over the rounds")!;
    expect(open.getAttribute("aria-pressed")).toBe("false");
    await act(async () => open.click());
    expect(groupSeries).toHaveBeenCalledWith(3, 2, expect.anything());
    const view = container.querySelector('[data-testid="group-series"]')!;
    expect(view.querySelector("h3")?.textContent).toBe("Group 2 over the rounds");
    expect(view.getAttribute("data-rounds")).toBe("3");
    expect(view.querySelector('[data-testid="group-chart-share_ones"]')?.getAttribute("data-points")).toBe(`1:0,2:${1 / 3},3:${2 / 3}`);
    expect(view.querySelectorAll("figure")).toHaveLength(2);
    expect(button("Group 2 over the rounds")!.getAttribute("aria-pressed")).toBe("true");
    await act(async () => button("Close")!.click());
    expect(container.querySelector('[data-testid="group-series"]')).toBeNull();
  });

  it("follows new rounds live when on the latest round, and stays put on a chosen one", async () => {
    let latest = 3;
    const { client, groupsPage, groupSeries } = fakeClient({ latest: () => latest });
    await show(client, 3);
    await act(async () => button("Group 1 over the rounds")!.click());
    latest = 4;
    await show(client, 4);
    expect(panel()?.getAttribute("data-round")).toBe("4");
    expect(container.querySelector('[data-testid="group-series"]')?.getAttribute("data-rounds")).toBe("4");
    expect(groupSeries).toHaveBeenCalledTimes(2);

    const select = container.querySelector("select")!;
    await act(async () => {
      select.value = "2";
      select.dispatchEvent(new Event("change", { bubbles: true }));
    });
    expect(groupsPage).toHaveBeenLastCalledWith(3, expect.objectContaining({ round: 2, after: null }));
    expect(panel()?.getAttribute("data-round")).toBe("2");
    const asked = groupsPage.mock.calls.length;
    latest = 5;
    await show(client, 5);
    expect(groupsPage).toHaveBeenCalledTimes(asked);
    expect(panel()?.getAttribute("data-round")).toBe("2");
  });

  it("says why a round could not be shown, keeping the groups on screen", async () => {
    const { client } = fakeClient({ latest: () => 99 });
    await show(client, 3);
    const select = container.querySelector("select")!;
    const option = document.createElement("option");
    option.value = "99";
    select.append(option);
    await act(async () => {
      select.value = "99";
      select.dispatchEvent(new Event("change", { bubbles: true }));
    });
    expect(container.querySelector('[role="alert"]')?.textContent).toContain("Could not load the groups: The manager answered HTTP 404: round 99 kept no group metrics");
    expect(rows()).toHaveLength(20);
  });

  it("shows a run grouped by an attribute with its labels, and metrics the plugin does not declare by name", async () => {
    const { client } = fakeClient({ latest: () => 2, labels: true });
    await show(client, 2, null);
    const headers = [...container.querySelectorAll("thead th")].map((th) => th.textContent);
    expect(headers).toEqual(["Group", "Label", "consensus_round", "share_ones"]);
    expect(rows()[3]!.querySelectorAll("td")[1]?.textContent).toBe("category 3");
  });

  it("downloads the export through the client (the token in a header), under the server's name", async () => {
    const { client, exportGroups } = fakeClient({ latest: () => 3 });
    await show(client, 3);
    await act(async () => button("Export groups JSONL")!.click());
    expect(exportGroups).toHaveBeenCalledWith(3, "jsonl");
    expect(saved).toEqual(["simulation-3-groups.jsonl"]);
    expect(container.querySelector('[aria-label="Group export result"]')?.textContent).toMatch(/^Downloaded simulation-3-groups\.jsonl \(/);
  });
});
