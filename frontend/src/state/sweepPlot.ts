import { SIMULATION_FINAL } from "../generated/rules";
import type { MetricDeclaration } from "./metrics";
import { metricRange } from "./metrics";

/**
 * A sweep's outcome against each swept param: one point per run, x the run's value of the param
 * (numbers on a number line, anything else as categories in grid order), y the run's chosen
 * final declared metric (its last kept round's value, from the runs list's `last_metrics`).
 * Pure, so the rules are unit-tested; components/SweepParamPlots.tsx draws it.
 */

/** A run of the sweep as the plots need it. */
export interface SweepRun {
  point: number;
  simulationId: number | null;
  params: Record<string, unknown>;
  status: string | null;
  /** Its last kept round's metrics (none before a round is kept). */
  metrics: Record<string, number | null> | undefined;
}

export type ParamAxis = { key: string; kind: "number"; min: number; max: number } | { key: string; kind: "category"; categories: string[] };

export interface PlotPoint {
  point: number;
  simulationId: number;
  /** 0..1 across the plot. */
  x: number;
  /** 0..1 up the plot. */
  y: number;
  param: string;
  value: number;
  finished: boolean;
  /** Points on the same spot (two seeds with the same outcome) are drawn side by side: 0, 1, -1, 2, … widths over. */
  dodge: number;
}

export interface SweepPlot {
  axis: ParamAxis;
  points: PlotPoint[];
  /** The y axis' ends. */
  range: [number, number];
}

const FINISHED: ReadonlySet<string> = new Set(SIMULATION_FINAL);

/** How a param's value reads: strings as they are, anything else as JSON ({"preset":"2/3"}). */
export function paramText(value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** One axis per grid key: a number line when every value is a finite number, else categories. */
export function paramAxes(grid: Record<string, readonly unknown[]>): ParamAxis[] {
  return Object.entries(grid).map(([key, values]) => {
    if (values.length > 0 && values.every((v) => typeof v === "number" && Number.isFinite(v))) {
      const numbers = values as number[];
      return { key, kind: "number", min: Math.min(...numbers), max: Math.max(...numbers) };
    }
    const categories: string[] = [];
    for (const v of values) if (!categories.includes(paramText(v))) categories.push(paramText(v));
    return { key, kind: "category", categories };
  });
}

/** Where a param value sits across the plot (0..1); null for a value the axis does not have. */
export function xOf(axis: ParamAxis, value: unknown): number | null {
  if (axis.kind === "number") {
    if (typeof value !== "number" || !Number.isFinite(value)) return null;
    return axis.max === axis.min ? 0.5 : (value - axis.min) / (axis.max - axis.min);
  }
  const i = axis.categories.indexOf(paramText(value));
  return i < 0 ? null : (i + 0.5) / axis.categories.length;
}

/** The metric's value for a run: a finite number, else null (no round kept yet, or none that round). */
export function outcomeOf(run: SweepRun, metric: string): number | null {
  const value = run.metrics?.[metric];
  return typeof value === "number" && Number.isFinite(value) ? value : null;
}

/** The plot of `metric` against one param: a point for each run with a value, the y range over all of them. */
export function sweepPlot(axis: ParamAxis, runs: readonly SweepRun[], metric: Pick<MetricDeclaration, "name" | "type">): SweepPlot {
  const valued = runs.flatMap((run) => {
    const value = outcomeOf(run, metric.name);
    const x = xOf(axis, run.params[axis.key]);
    return value === null || x === null || run.simulationId === null ? [] : [{ run, value, x }];
  });
  const values = valued.map((v) => v.value);
  const range = metricRange(values.length ? Math.min(...values) : null, values.length ? Math.max(...values) : null, metric.type === "integer");
  const span = range[1] - range[0] || 1;
  const points = valued
    .map(({ run, value, x }) => ({
      point: run.point,
      simulationId: run.simulationId as number,
      x,
      y: (value - range[0]) / span,
      param: paramText(run.params[axis.key]),
      value,
      finished: run.status !== null && FINISHED.has(run.status),
      dodge: 0,
    }))
    // Left to right, then bottom to top: the order the arrow keys read them in.
    .sort((a, b) => a.x - b.x || a.y - b.y || a.point - b.point);
  const onSpot = new Map<string, number>();
  for (const p of points) {
    const spot = `${p.x.toFixed(4)}:${p.y.toFixed(3)}`;
    const seen = onSpot.get(spot) ?? 0;
    onSpot.set(spot, seen + 1);
    p.dodge = seen === 0 ? 0 : seen % 2 === 1 ? (seen + 1) / 2 : -seen / 2;
  }
  return { axis, points, range };
}

/** Runs with no value of the metric yet (not launched, or no round kept). */
export function runsWithoutOutcome(runs: readonly SweepRun[], metric: string): number {
  return runs.filter((run) => run.simulationId === null || outcomeOf(run, metric) === null).length;
}

/**
 * The metrics offered as the outcome: the runs' declarations, or, when the plugin is gone and
 * declares none, the names the runs' last metrics carry (as plain numbers).
 */
export function outcomeChoices(declared: readonly MetricDeclaration[] | null | undefined, runs: readonly SweepRun[]): MetricDeclaration[] {
  if (declared && declared.length > 0) return [...declared];
  const names = new Set<string>();
  for (const run of runs) for (const name of Object.keys(run.metrics ?? {})) names.add(name);
  return [...names].sort().map((name) => ({ name, title: name, type: "number", unit: "", description: "" }));
}

/** The outcome shown first: the one asked for if offered, else the mean if there is one, else the first. */
export function defaultOutcome(choices: readonly MetricDeclaration[], asked: string | null): string | null {
  if (asked && choices.some((m) => m.name === asked)) return asked;
  return choices.find((m) => m.name === "mean")?.name ?? choices[0]?.name ?? null;
}

/** The point a pointer at (x, y) in 0..1 is nearest to, by distance on the plot. */
export function nearestPlotPoint(points: readonly PlotPoint[], x: number, y: number, aspect = 2): number | null {
  let best: number | null = null;
  let bestDistance = Infinity;
  points.forEach((p, i) => {
    const d = ((p.x - x) * aspect) ** 2 + (p.y - y) ** 2;
    if (d < bestDistance) {
      bestDistance = d;
      best = i;
    }
  });
  return best;
}
