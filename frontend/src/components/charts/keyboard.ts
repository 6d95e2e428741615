// Reading a uPlot chart from the keyboard: which point an arrow key moves to, and what the
// readout under the chart says there. Pure, so it is unit-tested (keyboard.test.ts).

const STEPS: Readonly<Record<string, number>> = { ArrowLeft: -1, ArrowRight: 1, PageUp: -10, PageDown: 10, Home: -Infinity, End: Infinity };

/**
 * The point a key moves to among `count` points, from `current` (null: none shown yet, so any
 * step starts at the last point, the latest round). undefined: the key is not a step.
 */
export function stepIndex(count: number, current: number | null, key: string): number | null | undefined {
  const step = STEPS[key];
  if (step === undefined) return undefined;
  if (count === 0) return null;
  if (current === null) return key === "Home" ? 0 : count - 1;
  return Math.max(0, Math.min(count - 1, current + step));
}

export interface ReadoutSeries {
  label: string;
  /** How a value reads (units, digits); the default is a plain number. */
  format?: (value: number) => string;
}

function plain(value: number): string {
  return Number.isInteger(value) ? value.toLocaleString("en-US") : value.toLocaleString("en-US", { maximumFractionDigits: 2 });
}

/**
 * "Round 3: Mean 22.1, Target 14.7": the x series names the point, every other series with a
 * value there follows; series without one are left out.
 */
export function describePoint(data: ReadonlyArray<ArrayLike<number | null | undefined>>, series: readonly ReadoutSeries[], index: number): string {
  const [xSeries, ...ySeries] = series;
  const x = data[0]?.[index];
  const head = `${xSeries?.label ?? "x"} ${x === null || x === undefined ? "–" : (xSeries?.format ?? plain)(x)}`;
  const values = ySeries.flatMap((s, i) => {
    const v = data[i + 1]?.[index];
    return v === null || v === undefined || !Number.isFinite(v) ? [] : [`${s.label} ${(s.format ?? plain)(v)}`];
  });
  return values.length > 0 ? `${head}: ${values.join(", ")}` : `${head}: no values`;
}
