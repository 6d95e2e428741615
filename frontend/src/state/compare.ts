import type { SimulationRound } from "../api/types";

/**
 * Comparing runs: the ids in the URL, their configs flattened and diffed, their curves on one
 * set of rounds, and their segment means side by side. Pure.
 */

/** More curves than this on one chart are unreadable (3 per run). */
export const MAX_COMPARED = 6;

/** "3,1,3,x,2" → [3, 1, 2]: positive integers, first occurrence kept, at most MAX_COMPARED. */
export function parseCompareIds(text: string | null | undefined): number[] {
  const ids: number[] = [];
  for (const part of (text ?? "").split(",")) {
    const trimmed = part.trim();
    if (!/^\d+$/.test(trimmed)) continue;
    const id = Number(trimmed);
    if (id > 0 && Number.isSafeInteger(id) && !ids.includes(id)) ids.push(id);
    if (ids.length === MAX_COMPARED) break;
  }
  return ids;
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

export const RUN_COLORS = ["#3355d1", "#d9901a", "#27a55a", "#a4262c", "#7a4fc9", "#1b8a8f"] as const;

export function runColor(index: number): string {
  return RUN_COLORS[index % RUN_COLORS.length] ?? "#3355d1";
}

export type Curve = "mean" | "target" | "winner_value";
export const CURVES: ReadonlyArray<{ key: Curve; label: string }> = [
  { key: "mean", label: "mean" },
  { key: "target", label: "target" },
  { key: "winner_value", label: "winner" },
];

/**
 * uPlot's aligned columns for runs of different lengths: x is every round any run played, and
 * each run's mean, target and winner (in that order, run by run) have null where it did not.
 */
export function overlaySeries(runs: ReadonlyArray<readonly SimulationRound[]>): { x: number[]; series: Array<Array<number | null>> } {
  const xs = new Set<number>();
  for (const rounds of runs) for (const r of rounds) xs.add(r.round);
  const x = [...xs].sort((a, b) => a - b);
  const series: Array<Array<number | null>> = [];
  for (const rounds of runs) {
    const byRound = new Map(rounds.map((r) => [r.round, r] as const));
    for (const { key } of CURVES) series.push(x.map((round) => byRound.get(round)?.[key] ?? null));
  }
  return { x, series };
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
