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

/** A round axis maximum: 1, 2 or 5 times a power of ten, at least the largest value. */
export function niceMax(max: number): number {
  if (!Number.isFinite(max) || max <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(max));
  for (const step of [1, 2, 5, 10]) {
    if (step * power >= max) return step * power;
  }
  return 10 * power;
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
