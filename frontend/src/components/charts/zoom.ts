/**
 * The x range after a zoom button: `factor` < 1 zooms in around the middle of what is shown,
 * > 1 zooms out; never beyond the data's full range, never narrower than `minSpan`.
 */
export function zoomRange(shown: [number, number], full: [number, number], factor: number, minSpan = 1): [number, number] {
  const [fullMin, fullMax] = full;
  const fullSpan = Math.max(0, fullMax - fullMin);
  const center = (shown[0] + shown[1]) / 2;
  const span = Math.min(fullSpan, Math.max(Math.min(minSpan, fullSpan), (shown[1] - shown[0]) * factor));
  let min = center - span / 2;
  let max = center + span / 2;
  if (min < fullMin) [min, max] = [fullMin, fullMin + span];
  if (max > fullMax) [min, max] = [fullMax - span, fullMax];
  return [min, max];
}

/** The extent of the x values (the first series of uPlot's aligned data), or null when empty. */
export function extent(xs: ArrayLike<number | null | undefined>): [number, number] | null {
  let min = Infinity;
  let max = -Infinity;
  for (let i = 0; i < xs.length; i++) {
    const x = xs[i];
    if (typeof x !== "number" || !Number.isFinite(x)) continue;
    if (x < min) min = x;
    if (x > max) max = x;
  }
  return min <= max ? [min, max] : null;
}

/** Data for a log y axis: a logarithm has no value at 0 or below, so those points are gaps. */
export function forLogScale<T extends ArrayLike<number | null | undefined>>(data: readonly T[]): Array<T | Array<number | null>> {
  return data.map((series, i) => (i === 0 ? series : Array.from(series as ArrayLike<number | null | undefined>, (v) => (typeof v === "number" && v > 0 ? v : null))));
}
