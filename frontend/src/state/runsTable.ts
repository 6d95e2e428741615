import { SIMULATION_STATUSES, type SimulationListItem, type SimulationStatus } from "../api/types";
import { parsePage } from "./paging";

/**
 * The runs table as a research table: what it shows (search, filters, sort, the columns chosen)
 * lives in the URL's query string, so a link or a reload shows the same table and the back
 * button comes back to it. The manager filters and sorts (GET /api/simulations); the page
 * applies the same status filter and order to the rows events change while it is open. Pure,
 * so the rules are unit-tested.
 *
 * ?q=beta&population_id=3&status=completed,failed&plugin=guess&sweep_id=2&sort=-name
 *  &params=rule.ratio,rule.offset&metrics=mean&hide=progress&page=2
 */

/** The run's own columns besides its name (always shown, pinned first), in table order. */
export const RUN_COLUMNS = [
  { id: "id", label: "ID", sort: "id" },
  { id: "population", label: "Population", sort: "population_id" },
  { id: "plugin", label: "Plugin", sort: "plugin" },
  { id: "status", label: "Status", sort: "status" },
  { id: "round", label: "Round", sort: "current_round" },
  { id: "progress", label: "Progress", sort: null },
  { id: "created", label: "Created", sort: "created_at" },
] as const;
export type RunColumn = (typeof RUN_COLUMNS)[number]["id"];

/** The sorts the manager applies itself; anything else (a param, a final metric, the plugin) is
 * sorted in the browser over the runs loaded. */
const SERVER_SORTS = new Set(["id", "name", "status", "population_id", "current_round", "created_at"]);

export interface RunSort {
  /** A server column ("name", "created_at", ...), "plugin", "param:rule.ratio" or "metric:mean". */
  key: string;
  descending: boolean;
}

/** Newest first. */
export const DEFAULT_SORT: RunSort = { key: "created_at", descending: true };

export interface RunsQuery {
  q: string;
  populationId: number | null;
  statuses: SimulationStatus[];
  plugin: string | null;
  sweepId: number | null;
  sort: RunSort;
  /** Param columns, as dotted paths into the runs' plugin params ("rule.ratio"). */
  params: string[];
  /** Final-metric columns, by metric name. */
  metrics: string[];
  /** The run's own columns left out. */
  hidden: RunColumn[];
  page: number;
}

const PLUGIN_NAME = /^[a-z][a-z0-9_]{0,63}$/;
const PARAM_PATH = /^[^,]{1,200}$/;
const METRIC_NAME = /^[a-z][a-z0-9_]*$/;

function list(raw: string | null): string[] {
  return raw === null ? [] : [...new Set(raw.split(",").map((s) => s.trim()).filter(Boolean))];
}

function positiveInt(raw: string | null): number | null {
  const n = Number(raw);
  return raw !== null && Number.isInteger(n) && n >= 1 ? n : null;
}

export function sortText(sort: RunSort): string {
  return `${sort.descending ? "-" : ""}${sort.key}`;
}

export function parseSort(raw: string | null): RunSort {
  if (!raw) return DEFAULT_SORT;
  const descending = raw.startsWith("-");
  const key = descending ? raw.slice(1) : raw;
  const known =
    SERVER_SORTS.has(key) ||
    key === "plugin" ||
    (key.startsWith("param:") && PARAM_PATH.test(key.slice(6))) ||
    (key.startsWith("metric:") && METRIC_NAME.test(key.slice(7)));
  return known ? { key, descending } : DEFAULT_SORT;
}

/** The table's state from a query string; anything malformed reads as its default. */
export function parseRunsQuery(search: string): RunsQuery {
  const p = new URLSearchParams(search);
  const plugin = p.get("plugin");
  const hidable = new Set<string>(RUN_COLUMNS.map((c) => c.id));
  return {
    q: (p.get("q") ?? "").slice(0, 200),
    populationId: positiveInt(p.get("population_id")),
    statuses: list(p.get("status")).filter((s): s is SimulationStatus => (SIMULATION_STATUSES as readonly string[]).includes(s)),
    plugin: plugin !== null && PLUGIN_NAME.test(plugin) ? plugin : null,
    sweepId: positiveInt(p.get("sweep_id")),
    sort: parseSort(p.get("sort")),
    params: list(p.get("params")).filter((k) => PARAM_PATH.test(k)),
    metrics: list(p.get("metrics")).filter((k) => METRIC_NAME.test(k)),
    hidden: list(p.get("hide")).filter((c): c is RunColumn => hidable.has(c)),
    page: parsePage(p.get("page")),
  };
}

/** The query-string changes that say `query` (defaults left out), for setSearchParams. */
export function runsQueryParams(query: RunsQuery): Record<string, string | null> {
  const sort = sortText(query.sort);
  return {
    q: query.q || null,
    population_id: query.populationId === null ? null : String(query.populationId),
    status: query.statuses.join(",") || null,
    plugin: query.plugin,
    sweep_id: query.sweepId === null ? null : String(query.sweepId),
    sort: sort === sortText(DEFAULT_SORT) ? null : sort,
    params: query.params.join(",") || null,
    metrics: query.metrics.join(",") || null,
    hide: query.hidden.join(",") || null,
    page: query.page > 1 ? String(query.page) : null,
  };
}

/** `query` with `change` applied; a change of what is listed goes back to the first page. */
export function changeQuery(query: RunsQuery, change: Partial<RunsQuery>): RunsQuery {
  const listing: Array<keyof RunsQuery> = ["q", "populationId", "statuses", "plugin", "sweepId", "sort"];
  const relisted = listing.some((k) => k in change && JSON.stringify(change[k]) !== JSON.stringify(query[k]));
  return { ...query, ...change, page: "page" in change ? (change.page ?? 1) : relisted ? 1 : query.page };
}

/** What the manager is asked for: the filters, and the sort when it can apply it. */
export function serverQuery(query: RunsQuery): Record<string, string | undefined> {
  const sort = SERVER_SORTS.has(query.sort.key) ? query.sort : DEFAULT_SORT;
  return {
    q: query.q.trim() || undefined,
    population_id: query.populationId === null ? undefined : String(query.populationId),
    status: query.statuses.join(",") || undefined,
    plugin: query.plugin ?? undefined,
    sweep_id: query.sweepId === null ? undefined : String(query.sweepId),
    sort: sortText(sort),
  };
}

/** A click on a column's header: the other direction when it is the sort, else ascending
 * (newest first for Created). */
export function nextSort(current: RunSort, key: string): RunSort {
  if (current.key === key) return { key, descending: !current.descending };
  return { key, descending: key === "created_at" };
}

export function ariaSort(current: RunSort, key: string): "ascending" | "descending" | undefined {
  if (current.key !== key) return undefined;
  return current.descending ? "descending" : "ascending";
}

/** Adds `item` to `items`, or takes it out when it is there. */
export function toggled<T>(items: readonly T[], item: T): T[] {
  return items.includes(item) ? items.filter((i) => i !== item) : [...items, item];
}

// --- cells ---------------------------------------------------------------------------------

/** Nested params as dotted paths to their leaves ({rule: {ratio: 0.5}} → {"rule.ratio": 0.5});
 * a list is one leaf. */
export function flattenParams(params: unknown, prefix = ""): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const walk = (node: unknown, path: string) => {
    if (node !== null && typeof node === "object" && !Array.isArray(node) && Object.keys(node).length > 0) {
      for (const [key, child] of Object.entries(node as Record<string, unknown>)) walk(child, path ? `${path}.${key}` : key);
    } else if (path) {
      out[path] = node;
    }
  };
  walk(params, prefix);
  return out;
}

/** The param paths and metric names the runs have, sorted, for the columns chooser. */
export function columnChoices(runs: readonly SimulationListItem[]): { params: string[]; metrics: string[] } {
  const params = new Set<string>();
  const metrics = new Set<string>();
  for (const run of runs) {
    for (const key of Object.keys(flattenParams(run.params ?? {}))) params.add(key);
    for (const key of Object.keys(run.last_metrics ?? {})) metrics.add(key);
  }
  return { params: [...params].sort(), metrics: [...metrics].sort() };
}

export function paramValue(run: SimulationListItem, path: string): unknown {
  return flattenParams(run.params ?? {})[path];
}

export function metricValue(run: SimulationListItem, name: string): number | null | undefined {
  return run.last_metrics?.[name];
}

/** A cell's text: numbers to 4 significant decimals, "–" for none. */
export function cellText(value: unknown): string {
  if (value === null || value === undefined) return "–";
  if (typeof value === "number") return Number.isFinite(value) ? value.toLocaleString("en-US", { maximumFractionDigits: 4 }) : "–";
  if (typeof value === "string") return value;
  return JSON.stringify(value);
}

/**
 * A sweep's run named by its sweep and the values it tried ("ratio sweep · rule.ratio 0.3,
 * seed 2"); any other run by its own name.
 */
export function runLabel(run: SimulationListItem): string {
  if (run.sweep_id === null || run.sweep_id === undefined || !run.sweep_name) return run.name;
  const point = Object.entries(flattenParams(run.sweep_params ?? {}))
    .map(([path, value]) => `${path} ${cellText(value)}`)
    .join(", ");
  return point ? `${run.sweep_name} · ${point}` : run.sweep_name;
}

// --- order and live filtering --------------------------------------------------------------

function sortValue(run: SimulationListItem, key: string): unknown {
  if (key.startsWith("param:")) return paramValue(run, key.slice(6));
  if (key.startsWith("metric:")) return metricValue(run, key.slice(7));
  if (key === "name") return run.name.toLowerCase();
  if (key === "plugin") return run.plugin ?? null;
  return (run as unknown as Record<string, unknown>)[key];
}

/** Numbers before text before anything else; a run without the value last either way. */
function compareValues(a: unknown, b: unknown): number {
  const rank = (v: unknown) => (typeof v === "number" ? 0 : typeof v === "string" ? 1 : 2);
  if (rank(a) !== rank(b)) return rank(a) - rank(b);
  if (typeof a === "number" && typeof b === "number") return a - b;
  if (typeof a === "string" && typeof b === "string") return a < b ? -1 : a > b ? 1 : 0;
  return cellText(a) < cellText(b) ? -1 : cellText(a) > cellText(b) ? 1 : 0;
}

/** The runs in `sort` order, ties by id in the same direction (as the manager orders them). */
export function sortRuns(runs: readonly SimulationListItem[], sort: RunSort): SimulationListItem[] {
  const sign = sort.descending ? -1 : 1;
  const missing = (v: unknown) => v === null || v === undefined;
  return [...runs].sort((a, b) => {
    const va = sortValue(a, sort.key);
    const vb = sortValue(b, sort.key);
    if (missing(va) !== missing(vb)) return missing(va) ? 1 : -1;
    return sign * (compareValues(va, vb) || a.id - b.id);
  });
}

/** The runs the table shows: the manager filtered them, but events may since have moved one
 * out of the statuses asked for. */
export function shownRuns(runs: readonly SimulationListItem[], query: RunsQuery): SimulationListItem[] {
  const live = query.statuses.length === 0 ? runs : runs.filter((r) => query.statuses.includes(r.status));
  return sortRuns(live, query.sort);
}

/** Whether the table shows anything but every run (for "No simulations match these filters"). */
export function isFiltered(query: RunsQuery): boolean {
  return query.q.trim() !== "" || query.populationId !== null || query.statuses.length > 0 || query.plugin !== null || query.sweepId !== null;
}
