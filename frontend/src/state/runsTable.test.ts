import { describe, expect, it } from "vitest";
import type { SimulationListItem } from "../api/types";
import {
  ariaSort,
  changeQuery,
  columnChoices,
  DEFAULT_SORT,
  flattenParams,
  isFiltered,
  nextSort,
  parseRunsQuery,
  runLabel,
  runsQueryParams,
  serverQuery,
  shownRuns,
  sortRuns,
  toggled,
} from "./runsTable";

function run(id: number, overrides: Partial<SimulationListItem> = {}): SimulationListItem {
  return {
    id,
    population_id: 1,
    name: `run ${id}`,
    status: "completed",
    rounds: 5,
    current_round: 5,
    seed: "1",
    error: null,
    stop_reason: null,
    pause_reason: null,
    lost_agents: 0,
    sweep_id: null,
    sweep_params: null,
    stores_changes: false,
    participation_floor: 0.8,
    rounds_below_floor: 0,
    created_at: `2026-12-0${id}T00:00:00.000Z`,
    started_at: null,
    finished_at: null,
    plugin: "guess",
    params: { rule: { ratio: 0.5, offset: 0 } },
    sweep_name: null,
    last_metrics: { mean: 10 * id },
    ...overrides,
  };
}

/** What the URL says after `change`, as the page writes it (setSearchParams drops nulls). */
function urlAfter(search: string, change: Parameters<typeof changeQuery>[1]): string {
  const params = new URLSearchParams(search);
  for (const [name, value] of Object.entries(runsQueryParams(changeQuery(parseRunsQuery(search), change)))) {
    if (value === null) params.delete(name);
    else params.set(name, value);
  }
  return params.toString();
}

describe("the runs table's URL state", () => {
  it("reads every part of the table from the query string", () => {
    const query = parseRunsQuery(
      "?q=beta&population_id=3&status=completed,failed&plugin=guess&sweep_id=2&sort=-param:rule.ratio&params=rule.ratio,rule.offset&metrics=mean&hide=progress,id&page=2",
    );
    expect(query).toEqual({
      q: "beta",
      populationId: 3,
      statuses: ["completed", "failed"],
      plugin: "guess",
      sweepId: 2,
      sort: { key: "param:rule.ratio", descending: true },
      params: ["rule.ratio", "rule.offset"],
      metrics: ["mean"],
      hidden: ["progress", "id"],
      page: 2,
    });
  });

  it("reads an empty or malformed query string as the defaults", () => {
    const defaults = parseRunsQuery("");
    expect(defaults).toMatchObject({ q: "", populationId: null, statuses: [], plugin: null, sweepId: null, sort: DEFAULT_SORT, params: [], metrics: [], hidden: [], page: 1 });
    expect(parseRunsQuery("?population_id=x&status=done,running&plugin=Not%20a%20name&sweep_id=-1&sort=bogus&metrics=Mean&hide=name&page=0")).toEqual({
      ...defaults,
      statuses: ["running"],
    });
  });

  it("writes back what it read, leaving defaults out (a plain URL is the default table)", () => {
    const search = "q=beta&population_id=3&status=completed%2Cfailed&plugin=guess&sweep_id=2&sort=-name&params=rule.ratio&metrics=mean&hide=progress&page=2";
    const written = runsQueryParams(parseRunsQuery(search));
    expect(new URLSearchParams(Object.entries(written).filter((e): e is [string, string] => e[1] !== null)).toString()).toBe(search);
    expect(Object.values(runsQueryParams(parseRunsQuery(""))).every((v) => v === null)).toBe(true);
  });

  it("goes back to the first page when what is listed changes, not when a column is added", () => {
    expect(urlAfter("status=completed&page=3", { q: "beta" })).toBe("status=completed&q=beta");
    expect(urlAfter("page=3", { sort: { key: "name", descending: false } })).toBe("sort=name");
    expect(urlAfter("page=3", { params: ["rule.ratio"] })).toBe("page=3&params=rule.ratio");
    expect(urlAfter("page=3", { page: 4 })).toBe("page=4");
    // Other parameters of the page (the launch form's) are kept.
    expect(urlAfter("launch=1", { statuses: ["running", "paused"] })).toBe("launch=1&status=running%2Cpaused");
  });

  it("asks the manager for the filters, and for the sort only when it can apply it", () => {
    const query = parseRunsQuery("q=%20beta%20&status=failed,cancelled&sort=-name&population_id=4");
    expect(serverQuery(query)).toEqual({ q: "beta", population_id: "4", status: "failed,cancelled", plugin: undefined, sweep_id: undefined, sort: "-name" });
    expect(serverQuery(parseRunsQuery("sort=metric:mean")).sort).toBe("-created_at");
    expect(serverQuery(parseRunsQuery("")).sort).toBe("-created_at");
    expect(isFiltered(parseRunsQuery("sort=name&params=x"))).toBe(false);
    expect(isFiltered(parseRunsQuery("sweep_id=1"))).toBe(true);
  });

  it("sorts by a header: ascending first (newest first for Created), the other way on a second click", () => {
    expect(nextSort(DEFAULT_SORT, "name")).toEqual({ key: "name", descending: false });
    expect(nextSort({ key: "name", descending: false }, "name")).toEqual({ key: "name", descending: true });
    expect(nextSort({ key: "name", descending: false }, "created_at")).toEqual(DEFAULT_SORT);
    expect(ariaSort(DEFAULT_SORT, "created_at")).toBe("descending");
    expect(ariaSort(DEFAULT_SORT, "name")).toBeUndefined();
    expect(toggled(["a", "b"], "a")).toEqual(["b"]);
    expect(toggled(["b"], "a")).toEqual(["b", "a"]);
  });
});

describe("the runs table's rows and columns", () => {
  it("flattens params to dotted paths, a list being one value", () => {
    expect(flattenParams({ rule: { ratio: 0.5, preset: null }, feedback: { mean: true }, tags: [1, 2], empty: {} })).toEqual({
      "rule.ratio": 0.5,
      "rule.preset": null,
      "feedback.mean": true,
      tags: [1, 2],
      empty: {},
    });
  });

  it("offers the params and metrics the runs have", () => {
    const runs = [run(1), run(2, { params: { rule: { ratio: 0.3 } , seed_mode: "x" }, last_metrics: { target: 3 } }), run(3, { params: undefined, last_metrics: undefined })];
    expect(columnChoices(runs)).toEqual({ params: ["rule.offset", "rule.ratio", "seed_mode"], metrics: ["mean", "target"] });
  });

  it("sorts by a param or a final metric, numbers as numbers, runs without the value last", () => {
    const runs = [
      run(1, { params: { rule: { ratio: 10 } }, last_metrics: { mean: 5 } }),
      run(2, { params: { rule: { ratio: 9 } }, last_metrics: {} }),
      run(3, { params: { rule: { ratio: 10 } }, last_metrics: { mean: 0.5 } }),
      run(4, { params: {} }),
    ];
    const ids = (sorted: SimulationListItem[]) => sorted.map((r) => r.id);
    expect(ids(sortRuns(runs, { key: "param:rule.ratio", descending: false }))).toEqual([2, 1, 3, 4]);
    expect(ids(sortRuns(runs, { key: "param:rule.ratio", descending: true }))).toEqual([3, 1, 2, 4]);
    expect(ids(sortRuns(runs, { key: "metric:mean", descending: false }))).toEqual([3, 1, 4, 2]);
    expect(ids(sortRuns([run(2, { name: "beta" }), run(1, { name: "Alpha" }), run(3, { name: "beta" })], { key: "name", descending: true }))).toEqual([3, 2, 1]);
    expect(ids(sortRuns(runs, DEFAULT_SORT))).toEqual([4, 3, 2, 1]);
  });

  it("drops a run an event moved out of the statuses asked for", () => {
    const runs = [run(1, { status: "running" }), run(2, { status: "completed" })];
    expect(shownRuns(runs, parseRunsQuery("status=running,paused")).map((r) => r.id)).toEqual([1]);
    expect(shownRuns(runs, parseRunsQuery("")).map((r) => r.id)).toEqual([2, 1]);
  });

  it("names a sweep's run by its sweep and the values it tried", () => {
    const swept = run(5, { name: "ratio sweep #2: rule.ratio=0.6", sweep_id: 2, sweep_name: "ratio sweep", sweep_params: { "rule.ratio": 0.6, policy: { depth: 2 } } });
    expect(runLabel(swept)).toBe("ratio sweep · rule.ratio 0.6, policy.depth 2");
    expect(runLabel(run(1))).toBe("run 1");
    expect(runLabel({ ...swept, sweep_name: null })).toBe(swept.name);
  });
});
