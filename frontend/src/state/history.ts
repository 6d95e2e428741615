// Load history (GET /api/workers/{id}/history, /api/cluster/history) as chart series, and a
// worker's followed log lines. Pure, for tests.

import type { HistoryPoint, LogLine, WorkerLogs } from "../api/types";
import { parseServerTime } from "../format";

/** What a history chart plots: times in epoch seconds, values (null: no value in that bucket). */
export interface Series {
  t: number[];
  v: (number | null)[];
}

export type HistoryField = "cpu_percent" | "rss_bytes" | "agents" | "llm_requests_per_s";

export function seriesOf(points: readonly HistoryPoint[], field: HistoryField): Series {
  const t: number[] = [];
  const v: (number | null)[] = [];
  for (const point of points) {
    const when = parseServerTime(point.t) / 1000;
    if (Number.isNaN(when)) continue;
    const value = point[field];
    t.push(when);
    v.push(typeof value === "number" && Number.isFinite(value) ? value : null);
  }
  return { t, v };
}

/** How many points have a value (what a chart says it shows). */
export function valuedPoints(series: Series): number {
  return series.v.reduce<number>((n, value) => (value === null ? n : n + 1), 0);
}

/** A round axis top: 1, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power of ten, at least the largest value. */
export function niceMax(max: number): number {
  if (!Number.isFinite(max) || max <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(max));
  for (const step of [1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) {
    if (step * power >= max * (1 - 1e-12)) return step * power;
  }
  return 10 * power;
}

/** The largest value of the series (null: it has none): what a chart's "max" says. */
export function seriesMax(series: Series): number | null {
  let max: number | null = null;
  for (const value of series.v) {
    if (value !== null && Number.isFinite(value) && (max === null || value > max)) max = value;
  }
  return max;
}

/** What a history chart spans: times from the first bucket to the end of the last one, values
 * from 0 to a round axis top above the data's true maximum. */
export interface ChartFrame {
  tMin: number;
  tMax: number;
  /** The axis top (a round number, labelled on the y axis). */
  vMax: number;
  /** The data's own maximum (null: no value yet). */
  dataMax: number | null;
}

export function chartFrame(series: Series, bucketS: number): ChartFrame {
  const first = series.t[0];
  const last = series.t.at(-1);
  const tMax = last !== undefined ? last + bucketS : 1;
  const tMin = first !== undefined ? Math.min(first, tMax - bucketS) : 0;
  const dataMax = seriesMax(series);
  return { tMin, tMax, vMax: niceMax(dataMax ?? 0), dataMax };
}

/** The index of the valued point nearest to time t (null: the series has no value). */
export function nearestPoint(series: Series, t: number): number | null {
  let best: number | null = null;
  let distance = Infinity;
  for (let i = 0; i < series.t.length; i++) {
    const at = series.t[i];
    if (at === undefined || series.v[i] === null || series.v[i] === undefined) continue;
    const d = Math.abs(at - t);
    if (d < distance) {
      best = i;
      distance = d;
    }
  }
  return best;
}

/** The valued point `step` points after (or, negative, before) index `from`, staying at the
 * ends; from null: the newest valued point. */
export function stepPoint(series: Series, from: number | null, step: number): number | null {
  const valued: number[] = [];
  series.v.forEach((value, i) => value !== null && valued.push(i));
  if (valued.length === 0) return null;
  if (from === null) return valued.at(-1) ?? null;
  const at = valued.indexOf(from);
  const next = (at < 0 ? valued.length - 1 : at) + step;
  return valued[Math.max(0, Math.min(valued.length - 1, next))] ?? null;
}

/** A bucket's time of day, local, to the second ("14:03:20"). */
export function formatClock(epochS: number): string {
  const d = new Date(epochS * 1000);
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, "0")).join(":");
}

export interface Box {
  width: number;
  height: number;
  /** The time range shown (epoch seconds). */
  tMin: number;
  tMax: number;
  vMax: number;
  /** Points further apart than this (seconds) are not joined: the worker was silent between. */
  maxGap: number;
}

/**
 * An SVG path through the series: a new segment after a missing value or a silent gap, so a
 * chart never draws a line across a time nobody measured. A lone point is a short dash.
 */
export function linePath(series: Series, box: Box): string {
  const span = Math.max(1e-9, box.tMax - box.tMin);
  const x = (t: number) => ((t - box.tMin) / span) * box.width;
  const y = (v: number) => box.height - (Math.min(v, box.vMax) / box.vMax) * box.height;
  const parts: string[] = [];
  let previous: number | null = null;
  for (let i = 0; i < series.t.length; i++) {
    const value = series.v[i];
    const t = series.t[i];
    if (value === null || value === undefined || t === undefined || t < box.tMin) {
      previous = null;
      continue;
    }
    const joined = previous !== null && t - previous <= box.maxGap;
    parts.push(`${joined ? "L" : "M"}${x(t).toFixed(1)} ${y(value).toFixed(1)}`);
    previous = t;
  }
  return parts.join(" ");
}

/** The newest valued point, for the chart's caption. */
export function lastValue(series: Series): number | null {
  for (let i = series.v.length - 1; i >= 0; i--) {
    const value = series.v[i];
    if (value !== null && value !== undefined) return value;
  }
  return null;
}

export function formatRate(perSecond: number | null): string {
  if (perSecond === null || !Number.isFinite(perSecond)) return "–";
  if (perSecond >= 100) return `${Math.round(perSecond).toLocaleString("en-US")} /s`;
  return `${perSecond.toFixed(perSecond >= 10 ? 1 : 2)} /s`;
}

/** The browser keeps at most this many log lines of a followed worker. */
export const MAX_LOG_LINES = 2000;

/** A followed log: the lines read so far, and where the next read starts. */
export interface LogFollow {
  lines: LogLine[];
  /** The last line number the worker had logged at the previous read: the next `after`. */
  after: number;
}

export const initialLogFollow: LogFollow = { lines: [], after: 0 };

/**
 * A read (GET /api/workers/{id}/logs?after=...) added to what was followed: ordered by
 * sequence, each line once, the newest `max` kept. A worker whose numbers went back (its
 * process restarted) starts the follow afresh: `after` 0, read again at once.
 */
export function applyLogRead(state: LogFollow, read: WorkerLogs, askedAfter: number, max = MAX_LOG_LINES): LogFollow {
  if (read.last_sequence < askedAfter) return initialLogFollow;
  const last = state.lines.at(-1)?.sequence ?? 0;
  const merged = [...state.lines, ...read.lines.filter((line) => line.sequence > last)];
  return {
    lines: merged.length > max ? merged.slice(merged.length - max) : merged,
    after: Math.max(askedAfter, read.last_sequence),
  };
}
