// A run's declared per-round metrics, charted with no code about the simulation that declares
// them: the declarations come with GET /api/simulations/{id} (`metrics`), the values with every
// round record and `round.completed` (`metrics: {name: value}`).
import type { SimulationDetail, SimulationRound } from "../api/types";

/** One declared metric: {name, title, type, unit, description}. */
export type MetricDeclaration = NonNullable<SimulationDetail["metrics"]>[number];

/** What a chart reads of a round: its number and its values by name (a run's round, or a group's). */
export type RoundValues = Pick<SimulationRound, "round" | "metrics">;

/**
 * The metrics to chart: none when the manager declares none (older managers leave `metrics`
 * out), or when rounds have completed and none of them carries `metrics` (rounds stored by a
 * manager that did not keep them). A run with no round yet shows its declarations, empty.
 */
export function chartedMetrics(declared: readonly MetricDeclaration[] | null | undefined, rounds: readonly RoundValues[]): readonly MetricDeclaration[] {
  if (!Array.isArray(declared) || declared.length === 0) return [];
  if (rounds.length > 0 && !rounds.some((r) => isValues(r.metrics))) return [];
  return declared;
}

function isValues(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A round's value of a metric: null when the round has none (a gap on the chart, never a 0). */
export function metricValue(round: RoundValues | undefined, name: string): number | null {
  const values = round?.metrics;
  if (!isValues(values)) return null;
  const value = values[name];
  return typeof value === "number" && Number.isFinite(value) ? value : null;
}

/** uPlot's aligned data for one metric: rounds on x, the metric's values (null for a gap) on y. */
export function metricSeries(rounds: readonly RoundValues[], name: string): [number[], Array<number | null>] {
  return [rounds.map((r) => r.round), rounds.map((r) => metricValue(r, name))];
}

/** A value as its type reads: integers whole, numbers to `digits` decimals; "–" for none. */
export function formatMetric(value: number | null | undefined, metric: Pick<MetricDeclaration, "type">, digits = 2): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return "–";
  if (metric.type === "integer") return Math.round(value).toLocaleString("en-US");
  return value.toLocaleString("en-US", { maximumFractionDigits: digits });
}

/** The same with the declared unit after it ("12 agents"); a missing value has no unit. */
export function formatMetricWithUnit(value: number | null | undefined, metric: Pick<MetricDeclaration, "type" | "unit">, digits = 2): string {
  const text = formatMetric(value, metric, digits);
  const unit = metric.unit?.trim();
  if (text === "–" || !unit) return text;
  return unit === "%" ? `${text}%` : `${text} ${unit}`;
}

/**
 * The y range for a metric's values: 5 % of padding, never below 0 for values that are not, a
 * flat series widened so that it sits in the middle, whole numbers for an integer metric.
 */
export function metricRange(min: number | null | undefined, max: number | null | undefined, integer: boolean): [number, number] {
  if (min === null || min === undefined || max === null || max === undefined || !Number.isFinite(min) || !Number.isFinite(max)) return [0, 1];
  let lo: number;
  let hi: number;
  if (min === max) {
    const pad = integer ? 1 : Math.abs(min) * 0.1 || 1;
    lo = min - pad;
    hi = max + pad;
  } else {
    const pad = (max - min) * 0.05;
    lo = min - pad;
    hi = max + pad;
  }
  if (min >= 0 && lo < 0) lo = 0;
  if (integer) {
    lo = Math.floor(lo);
    hi = Math.ceil(hi);
  }
  return [lo, hi];
}

/** Tick steps of an integer axis: 1, 2, 5, 10, 20, 50, … (never a fraction). */
export const INTEGER_STEPS: readonly number[] = Array.from({ length: 16 }, (_, e) => [1, 2, 5].map((m) => m * 10 ** e)).flat();

/**
 * A chart's accessible name: the metric, its unit, how many rounds, the value at the latest
 * round and the extremes with their rounds (what a sighted reader takes from the line).
 */
export function metricChartLabel(metric: MetricDeclaration, rounds: readonly RoundValues[]): string {
  const unit = metric.unit?.trim() ? ` (${metric.unit.trim()})` : "";
  const title = `${metric.title}${unit}`;
  if (rounds.length === 0) return `${title}: no rounds yet`;
  let low: { round: number; value: number } | null = null;
  let high: { round: number; value: number } | null = null;
  let valued = 0;
  for (const r of rounds) {
    const value = metricValue(r, metric.name);
    if (value === null) continue;
    valued += 1;
    if (!low || value < low.value) low = { round: r.round, value };
    if (!high || value > high.value) high = { round: r.round, value };
  }
  const last = rounds[rounds.length - 1]!;
  const count = `${rounds.length} ${rounds.length === 1 ? "round" : "rounds"}`;
  const latest = `round ${last.round}: ${formatMetricWithUnit(metricValue(last, metric.name), metric)}`;
  if (!low || !high) return `${title} over ${count}; no values`;
  const gaps = rounds.length - valued;
  const gapText = gaps > 0 ? `; ${gaps} ${gaps === 1 ? "round" : "rounds"} without a value` : "";
  return `${title} over ${count}; ${latest}; lowest ${formatMetricWithUnit(low.value, metric)} (round ${low.round}), highest ${formatMetricWithUnit(high.value, metric)} (round ${high.round})${gapText}`;
}
