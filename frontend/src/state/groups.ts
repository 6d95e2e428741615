// A run's group metrics (GET /api/simulations/{id}/groups): figures per group each round, shown
// from the names the API keeps and, when the plugin declares them, their titles, types and
// units. Nothing here knows a plugin. Pure, so it is unit-tested (groups.test.ts).
import type { GroupPage, GroupRow, GroupSeries } from "../api/types";
import { type MetricDeclaration, type RoundValues, formatMetric } from "./metrics";

/** Groups per page of the table: the browser holds one page, whatever the population's size. */
export const GROUPS_PAGE_SIZE = 20;

/**
 * One declaration per kept metric, in the API's order: the plugin's when it declares the name
 * (title, type, unit, description), else the bare name (an uninstalled plugin, an older manager).
 */
export function groupColumns(names: readonly string[], declared: readonly MetricDeclaration[] | null | undefined): MetricDeclaration[] {
  return names.map((name) => declared?.find((d) => d.name === name) ?? { name, title: name, type: "number", unit: "", description: "" });
}

/** Whether any group on the page has a label (a run grouped by an attribute). */
export function hasLabels(items: readonly GroupRow[]): boolean {
  return items.some((g) => g.label !== null && g.label !== undefined);
}

export interface MetricSummary {
  /** Groups on the page with a value (e.g. those that reached consensus). */
  count: number;
  groups: number;
  min: number | null;
  mean: number | null;
  max: number | null;
}

/** One metric over the groups of a page: how many have a value, and their min, mean and max. */
export function summarize(items: readonly GroupRow[], name: string): MetricSummary {
  let count = 0;
  let sum = 0;
  let min = Infinity;
  let max = -Infinity;
  for (const g of items) {
    const value = g.values[name];
    if (typeof value !== "number" || !Number.isFinite(value)) continue;
    count += 1;
    sum += value;
    min = Math.min(min, value);
    max = Math.max(max, value);
  }
  if (count === 0) return { count, groups: items.length, min: null, mean: null, max: null };
  return { count, groups: items.length, min, mean: sum / count, max };
}

/** "18 of 20 with a value: min 2, mean 5.5, max 12" (a mean keeps its decimals, even of an integer metric). */
export function summaryText(summary: MetricSummary, metric: Pick<MetricDeclaration, "type">): string {
  const counted = `${summary.count.toLocaleString("en-US")} of ${summary.groups.toLocaleString("en-US")} with a value`;
  if (summary.count === 0) return counted;
  const mean = formatMetric(summary.mean, { type: "number" });
  return `${counted}: min ${formatMetric(summary.min, metric)}, mean ${mean}, max ${formatMetric(summary.max, metric)}`;
}

/** A group's rounds as a chart reads a run's: {round, metrics}. */
export function seriesRounds(series: GroupSeries | null): RoundValues[] {
  return (series?.items ?? []).map((r) => ({ round: r.round, metrics: r.values }));
}

/** "groups 20–39 shown" for the page on screen (groups are numbered from 0). */
export function pageRange(items: readonly GroupRow[]): string {
  const first = items[0]?.group;
  const last = items[items.length - 1]?.group;
  if (first === undefined || last === undefined) return "no groups shown";
  if (first === last) return `group ${first.toLocaleString("en-US")} shown`;
  return `groups ${first.toLocaleString("en-US")}–${last.toLocaleString("en-US")} shown`;
}

/**
 * Whether the run keeps no group metrics, for sure: the API named none although a round had
 * completed before it was asked (a round's group metrics are stored with it). Before the first
 * round nothing can be told yet.
 */
export function keepsNoGroups(page: GroupPage | null, latestRoundAsked: number | null): boolean {
  return page !== null && page.names.length === 0 && latestRoundAsked !== null;
}
