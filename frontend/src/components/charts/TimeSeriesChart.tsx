import { useMemo } from "react";
import { type Series, lastValue, linePath, niceMax, valuedPoints } from "../../state/history";

const WIDTH = 300;
const HEIGHT = 80;

interface TimeSeriesChartProps {
  title: string;
  series: Series;
  /** How a value reads (axis maximum and the latest value). */
  format: (value: number) => string;
  /** Seconds per point: points further apart than two buckets are not joined. */
  bucketS: number;
  testId?: string;
}

function ago(seconds: number): string {
  if (seconds < 90) return `${Math.round(seconds)} s ago`;
  return `${Math.round(seconds / 60)} min ago`;
}

/**
 * A small time-series chart in SVG: one line over the time the points cover (up to the
 * history's window), its maximum and latest value written out. No chart library: it is drawn
 * again from scratch when a poll brings new points, which at 360 points costs nothing.
 * `data-points` says how many points have a value (tests wait on it).
 */
export function TimeSeriesChart({ title, series, format, bucketS, testId }: TimeSeriesChartProps) {
  const { path, max, span } = useMemo(() => {
    const first = series.t[0];
    const last = series.t.at(-1);
    const tMax = last !== undefined ? last + bucketS : 1;
    const tMin = first !== undefined ? Math.min(first, tMax - bucketS) : 0;
    const values = series.v.filter((v): v is number => v !== null);
    const vMax = niceMax(values.length > 0 ? Math.max(...values) : 0);
    const box = { width: WIDTH, height: HEIGHT, tMin, tMax, vMax, maxGap: bucketS * 2.5 };
    return { path: linePath(series, box), max: vMax, span: tMax - tMin };
  }, [series, bucketS]);
  const points = valuedPoints(series);
  const latest = lastValue(series);
  const label = points > 0 ? `${title}: ${points} points over the last ${ago(span).replace(" ago", "")}, latest ${format(latest ?? 0)}` : `${title}: no data yet`;

  return (
    <figure className="history-chart" data-testid={testId} data-points={points}>
      <figcaption>
        <span>{title}</span>
        <strong>{latest === null ? "–" : format(latest)}</strong>
      </figcaption>
      <svg viewBox={`0 0 ${WIDTH} ${HEIGHT}`} preserveAspectRatio="none" role="img" aria-label={label}>
        <line x1="0" y1={HEIGHT} x2={WIDTH} y2={HEIGHT} className="history-axis" />
        <line x1="0" y1="0.5" x2={WIDTH} y2="0.5" className="history-grid" />
        {path && <path d={path} className="history-line" vectorEffect="non-scaling-stroke" />}
      </svg>
      <div className="history-scale muted">
        <span>{points > 0 ? ago(span) : "waiting for heartbeats"}</span>
        <span>max {format(max)}</span>
      </div>
    </figure>
  );
}
