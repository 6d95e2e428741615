import type { SimulationRound } from "../api/types";
import { type MetricDeclaration, metricValue } from "./metrics";

/**
 * Comparing runs: the ids in the URL, their configs flattened and diffed, their curves on one
 * set of rounds, and their segment means side by side. Pure.
 */

/**
 * The most runs one comparison loads: a sweep's largest grid (backend/sweeps/config.py
 * MAX_RUNS), so "Compare runs" on any sweep compares all of it. Ids past it are named in the
 * page's notice, never dropped silently.
 */
export const MAX_COMPARED = 256;

/** Runs loaded at a time: each is two requests (its detail, its rounds). */
export const LOAD_CONCURRENCY = 6;

/** What the URL asked for: the ids compared, and what of it was left out and why. */
export interface CompareSelection {
  ids: number[];
  /** Parts of the list that are not run ids ("x", "0", "1.5"). */
  invalid: string[];
  /** Valid ids past MAX_COMPARED, in the order given. */
  beyondLimit: number[];
}

/** "3,1,3,x,2" → ids [3, 1, 2] (first occurrence kept) and invalid ["x"]; at most MAX_COMPARED ids. */
export function readCompareIds(text: string | null | undefined): CompareSelection {
  const ids: number[] = [];
  const invalid: string[] = [];
  const beyondLimit: number[] = [];
  for (const part of (text ?? "").split(",")) {
    const trimmed = part.trim();
    if (trimmed === "") continue;
    const id = Number(trimmed);
    if (!/^\d+$/.test(trimmed) || id <= 0 || !Number.isSafeInteger(id)) {
      if (!invalid.includes(trimmed)) invalid.push(trimmed);
      continue;
    }
    if (ids.includes(id) || beyondLimit.includes(id)) continue;
    if (ids.length < MAX_COMPARED) ids.push(id);
    else beyondLimit.push(id);
  }
  return { ids, invalid, beyondLimit };
}

/** The ids compared (see readCompareIds). */
export function parseCompareIds(text: string | null | undefined): number[] {
  return readCompareIds(text).ids;
}

/** How one asked-for run ended up: loaded, gone (404), or failed to load (with the reason). */
export type RunOutcome = { id: number; state: "loaded" } | { id: number; state: "missing" } | { id: number; state: "failed"; reason: string };

/**
 * One sentence saying what of the selection is not on the page and why, or null when every run
 * asked for is compared. Runs still loading are not counted as left out.
 */
export function compareNotice(selection: CompareSelection, outcomes: readonly RunOutcome[]): string | null {
  const parts: string[] = [];
  const missing = outcomes.filter((o) => o.state === "missing").map((o) => `#${o.id}`);
  const failed = outcomes.filter((o): o is Extract<RunOutcome, { state: "failed" }> => o.state === "failed");
  if (missing.length > 0) parts.push(`${listText(missing)} ${missing.length === 1 ? "does" : "do"} not exist`);
  if (failed.length > 0) parts.push(`${listText(failed.map((o) => `#${o.id}`))} could not be loaded (${failed[0]?.reason ?? ""})`);
  if (selection.beyondLimit.length > 0) {
    parts.push(`${listText(selection.beyondLimit.map((id) => `#${id}`), 5)} ${selection.beyondLimit.length === 1 ? "is" : "are"} past the ${MAX_COMPARED} runs one comparison holds`);
  }
  if (selection.invalid.length > 0) parts.push(`${listText(selection.invalid.map((t) => `"${t}"`), 5)} ${selection.invalid.length === 1 ? "is" : "are"} not a run id`);
  if (parts.length === 0) return null;
  const asked = selection.ids.length + selection.beyondLimit.length;
  const compared = outcomes.filter((o) => o.state === "loaded").length;
  return `Comparing ${compared} of the ${asked} run${asked === 1 ? "" : "s"} asked for: ${parts.join("; ")}.`;
}

/** "#1, #2 and #3"; past `max` items, "#1, #2, … and 7 more". */
function listText(items: readonly string[], max = 20): string {
  if (items.length <= max) return items.length <= 1 ? (items[0] ?? "") : `${items.slice(0, -1).join(", ")} and ${items[items.length - 1]}`;
  return `${items.slice(0, max).join(", ")}, … and ${items.length - max} more`;
}

/** `fn` over `items` with at most `limit` running at once; results in the items' order. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const lane = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  return results;
}

export function compareHref(ids: readonly number[]): string {
  return `/compare?ids=${ids.join(",")}`;
}

/** Selection on the list: toggles one id, keeping the order they were picked in. */
export function toggleSelected(selected: readonly number[], id: number): number[] {
  return selected.includes(id) ? selected.filter((s) => s !== id) : [...selected, id];
}

function leafText(value: unknown): string {
  if (typeof value === "string") return value;
  if (value === undefined) return "";
  return JSON.stringify(value);
}

/**
 * A config as dotted paths to leaf values ("policy.endpoints.0.model" → "gemma"). Empty
 * objects and arrays are leaves ("{}", "[]") so a path that exists on one side only shows.
 */
export function flattenConfig(value: unknown, prefix = ""): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (node: unknown, path: string) => {
    if (node !== null && typeof node === "object") {
      const entries = Array.isArray(node) ? node.map((v, i) => [String(i), v] as const) : Object.entries(node as Record<string, unknown>);
      if (entries.length === 0) {
        out[path] = Array.isArray(node) ? "[]" : "{}";
        return;
      }
      for (const [key, child] of entries) walk(child, path ? `${path}.${key}` : key);
      return;
    }
    out[path] = leafText(node);
  };
  walk(value, prefix);
  return out;
}

export interface DiffRow {
  path: string;
  /** Per run, in the order given; null where the run's config has no such path. */
  values: Array<string | null>;
  differs: boolean;
}

/** Every path of any config, sorted, with whether the runs disagree on it. */
export function configDiff(configs: readonly unknown[]): DiffRow[] {
  const flat = configs.map((c) => flattenConfig(c));
  const paths = new Set<string>();
  for (const f of flat) for (const p of Object.keys(f)) paths.add(p);
  return [...paths].sort(comparePaths).map((path) => {
    const values = flat.map((f) => (path in f ? (f[path] ?? null) : null));
    return { path, values, differs: values.some((v) => v !== values[0]) };
  });
}

/** Alphabetical, but array indexes in number order ("a.2" before "a.10"). */
function comparePaths(a: string, b: string): number {
  return a.localeCompare(b, "en", { numeric: true });
}

export const RUN_COLORS = ["#3355d1", "#d9901a", "#27a55a", "#a4262c", "#7a4fc9", "#1b8a8f", "#c2185b", "#6b7d00", "#0b6fa4", "#8d5a2b", "#e0529c", "#455a64"] as const;

/** Twelve distinct colours (a 12-run sweep's lines all differ), then hues spread by the golden angle. */
export function runColor(index: number): string {
  if (index < RUN_COLORS.length) return RUN_COLORS[index] ?? "#3355d1";
  const hue = Math.round((index * 137.508) % 360);
  return `hsl(${hue} 62% ${index % 2 === 0 ? 40 : 50}%)`;
}

/**
 * A curve is one declared metric of the runs (state/metrics.ts), so any plugin's runs compare.
 * Runs from a manager that declared none get the guessing game's three columns.
 */
export interface Curve {
  name: string;
  title: string;
}

const GUESS_CURVES: readonly Curve[] = [
  { name: "mean", title: "Mean guess" },
  { name: "target", title: "Target" },
  { name: "winner_value", title: "Winning guess" },
];

/** Every metric any of the runs declares, in the order first declared (a run without one has gaps). */
export function compareCurves(declared: ReadonlyArray<ReadonlyArray<Pick<MetricDeclaration, "name" | "title">> | null | undefined>): Curve[] {
  const curves: Curve[] = [];
  for (const list of declared) for (const m of list ?? []) if (!curves.some((c) => c.name === m.name)) curves.push({ name: m.name, title: m.title });
  return curves.length > 0 ? curves : [...GUESS_CURVES];
}

/**
 * Curves drawn at first: the guessing game's mean, target and winner for a few runs, its mean
 * alone for more (36 lines read as noise); another plugin's first metric.
 */
export function defaultCurves(curves: readonly Curve[], runs: number): string[] {
  const names = curves.map((c) => c.name);
  if (!names.includes("mean")) return names.slice(0, 1);
  if (runs > 6) return ["mean"];
  return GUESS_CURVES.map((c) => c.name).filter((name) => names.includes(name));
}

/** The curves the URL's `metrics` names (those the runs have), or the defaults when it names none of them. */
export function chosenCurves(available: readonly Curve[], param: string | null, runs: number): string[] {
  const asked = (param ?? "").split(",").map((s) => s.trim());
  const known = available.map((c) => c.name).filter((name) => asked.includes(name));
  return known.length > 0 ? known : defaultCurves(available, runs);
}

/** A round's value of a curve: its declared metric, or the same-named column of an older round. */
export function curveValue(round: SimulationRound | undefined, name: string): number | null {
  const declared = metricValue(round, name);
  if (declared !== null) return declared;
  const column = (round as Record<string, unknown> | undefined)?.[name];
  return typeof column === "number" && Number.isFinite(column) ? column : null;
}

/**
 * uPlot's aligned columns for runs of different lengths: x is every round any run played, and
 * each run's curves (in the order given, run by run) have null where it did not.
 */
export function overlaySeries(runs: ReadonlyArray<readonly SimulationRound[]>, curves: readonly string[]): { x: number[]; series: Array<Array<number | null>> } {
  const xs = new Set<number>();
  for (const rounds of runs) for (const r of rounds) xs.add(r.round);
  const x = [...xs].sort((a, b) => a - b);
  const series: Array<Array<number | null>> = [];
  for (const rounds of runs) {
    const byRound = new Map(rounds.map((r) => [r.round, r] as const));
    for (const name of curves) series.push(x.map((round) => curveValue(byRound.get(round), name)));
  }
  return { x, series };
}

/** A curve's line by its place among those drawn: solid, dashed, dots, dotted, dash-dot, then again. */
export function curveStyle(index: number): { dash?: number[]; width: number; points: boolean } {
  switch (index % 5) {
    case 0:
      return { width: 2, points: true };
    case 1:
      return { dash: [6, 4], width: 1.5, points: false };
    case 2:
      return { width: 0, points: true };
    case 3:
      return { dash: [2, 3], width: 1.5, points: false };
    default:
      return { dash: [8, 3, 2, 3], width: 1.5, points: false };
  }
}

export interface SegmentRow {
  category: string;
  /** Per run: the category's mean in the run's last round (null when absent there). */
  means: Array<number | null>;
  counts: Array<number | null>;
}

/** Per attribute, each category's mean in each run's last round, side by side. */
export function segmentComparison(lastRounds: ReadonlyArray<SimulationRound | undefined>): Array<{ attribute: string; rows: SegmentRow[] }> {
  const attributes = new Map<string, Set<string>>();
  for (const round of lastRounds) {
    for (const [attribute, categories] of Object.entries(round?.segments ?? {})) {
      const set = attributes.get(attribute) ?? new Set<string>();
      for (const category of Object.keys(categories)) set.add(category);
      attributes.set(attribute, set);
    }
  }
  return [...attributes.entries()]
    .sort((a, b) => a[0].localeCompare(b[0]))
    .map(([attribute, categories]) => ({
      attribute,
      rows: [...categories].sort((a, b) => a.localeCompare(b, "en", { numeric: true })).map((category) => {
        const stats = lastRounds.map((round) => round?.segments?.[attribute]?.[category]);
        return { category, means: stats.map((s) => s?.mean ?? null), counts: stats.map((s) => s?.count ?? null) };
      }),
    }));
}

export interface ReadoutRun {
  id: number;
  name: string;
  color: string;
  /** Only the curves this run has a value for at the round read. */
  values: Array<{ label: string; value: number }>;
}

/**
 * What the chart's readout says at point `idx` (hovered, or stepped to with the keyboard): the
 * round, then each run with a value there and only the values it has. Runs that had not
 * played that round are left out, so the readout never lists empty "--" entries.
 */
export function readoutAt(
  overlay: { x: readonly number[]; series: ReadonlyArray<ReadonlyArray<number | null>> },
  runs: ReadonlyArray<{ id: number; name: string }>,
  curves: readonly Curve[],
  idx: number | null,
): { round: number; runs: ReadoutRun[] } | null {
  if (idx === null || idx < 0 || idx >= overlay.x.length) return null;
  const rows: ReadoutRun[] = [];
  runs.forEach((run, r) => {
    const values = curves.flatMap((curve, c) => {
      const value = overlay.series[r * curves.length + c]?.[idx];
      return typeof value === "number" && Number.isFinite(value) ? [{ label: curve.title, value }] : [];
    });
    if (values.length > 0) rows.push({ id: run.id, name: run.name, color: runColor(r), values });
  });
  return { round: overlay.x[idx] as number, runs: rows };
}
