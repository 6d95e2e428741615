import { type KeyboardEvent, type PointerEvent, useMemo, useState } from "react";
import { type Series, chartFrame, formatClock, lastValue, linePath, nearestPoint, stepPoint, valuedPoints } from "../../state/history";

const WIDTH = 300;
const HEIGHT = 80;

interface TimeSeriesChartProps {
  title: string;
  series: Series;
  /** How a value reads (axis labels, the maximum, the latest and the hovered value). */
  format: (value: number) => string;
  /** Seconds per point: points further apart than two buckets are not joined. */
  bucketS: number;
  testId?: string;
}

function ago(seconds: number): string {
  if (seconds < 90) return `${Math.round(seconds)} s ago`;
  return `${Math.round(seconds / 60)} min ago`;
}

const STEPS: Record<string, number> = { ArrowLeft: -1, ArrowRight: 1, PageUp: -10, PageDown: 10, Home: -Infinity, End: Infinity };

/**
 * A small time-series chart in SVG: one line over the time the points cover (up to the
 * history's window), with a labelled value axis (0 to a round top) and time axis (how long ago
 * to now). Below it the data's true maximum, and the value under the pointer: hover the plot,
 * or focus it and step through the points with the arrow keys. No chart library: it is drawn
 * again from scratch when a poll brings new points, which at 360 points costs nothing.
 * `data-points` says how many points have a value (tests wait on it).
 */
export function TimeSeriesChart({ title, series, format, bucketS, testId }: TimeSeriesChartProps) {
  const { frame, path } = useMemo(() => {
    const frame = chartFrame(series, bucketS);
    const box = { width: WIDTH, height: HEIGHT, ...frame, maxGap: bucketS * 2.5 };
    return { frame, path: linePath(series, box) };
  }, [series, bucketS]);
  // The hovered point by its time, so it stays put as new polls shift the series along.
  const [hoverT, setHoverT] = useState<number | null>(null);
  const hovered = hoverT === null ? -1 : series.t.indexOf(hoverT);
  const hoverValue = hovered >= 0 ? (series.v[hovered] ?? null) : null;

  const points = valuedPoints(series);
  const latest = lastValue(series);
  const span = frame.tMax - frame.tMin;
  const label = points > 0 ? `${title}: ${points} points over the last ${ago(span).replace(" ago", "")}, latest ${format(latest ?? 0)}, max ${format(frame.dataMax ?? 0)}` : `${title}: no data yet`;
  const x = (t: number) => ((t - frame.tMin) / Math.max(1e-9, span)) * 100;
  const y = (v: number) => 100 - (Math.min(v, frame.vMax) / frame.vMax) * 100;

  const pointAt = (i: number | null) => setHoverT(i === null ? null : (series.t[i] ?? null));
  function onPointerMove(event: PointerEvent<HTMLDivElement>) {
    const rect = event.currentTarget.getBoundingClientRect();
    const share = rect.width > 0 ? (event.clientX - rect.left) / rect.width : 1;
    pointAt(nearestPoint(series, frame.tMin + Math.max(0, Math.min(1, share)) * span));
  }
  function onKeyDown(event: KeyboardEvent<HTMLDivElement>) {
    if (event.key === "Escape") return setHoverT(null);
    const step = STEPS[event.key];
    if (step === undefined) return;
    event.preventDefault();
    pointAt(stepPoint(series, hovered >= 0 ? hovered : null, hovered >= 0 ? step : 0));
  }

  return (
    <figure className="history-chart" data-testid={testId} data-points={points}>
      <figcaption>
        <span>{title}</span>
        <strong>{latest === null ? "–" : format(latest)}</strong>
      </figcaption>
      <div className="history-plot">
        <div className="history-y-axis" aria-hidden="true" data-testid={testId && `${testId}-y-axis`}>
          <span>{format(frame.vMax)}</span>
          <span>{format(0)}</span>
        </div>
        {/* Focusable, so the values can be read without a pointer: arrows step, Escape leaves. */}
        <div
          className="history-canvas"
          role="group"
          tabIndex={points > 0 ? 0 : -1}
          aria-label={`${title}: use the arrow keys to read each point`}
          onPointerMove={onPointerMove}
          onPointerLeave={() => setHoverT(null)}
          onFocus={() => hovered < 0 && pointAt(stepPoint(series, null, 0))}
          onBlur={() => setHoverT(null)}
          onKeyDown={onKeyDown}
        >
          <svg viewBox={`0 0 ${WIDTH} ${HEIGHT}`} preserveAspectRatio="none" role="img" aria-label={label}>
            <line x1="0" y1={HEIGHT} x2={WIDTH} y2={HEIGHT} className="history-axis" />
            <line x1="0" y1="0.5" x2={WIDTH} y2="0.5" className="history-grid" />
            {path && <path d={path} className="history-line" vectorEffect="non-scaling-stroke" />}
            {hoverValue !== null && hoverT !== null && (
              <line x1={(x(hoverT) * WIDTH) / 100} y1="0" x2={(x(hoverT) * WIDTH) / 100} y2={HEIGHT} className="history-cursor" />
            )}
          </svg>
          {hoverValue !== null && hoverT !== null && <span className="history-dot" style={{ left: `${x(hoverT)}%`, top: `${y(hoverValue)}%` }} />}
        </div>
        <div className="history-x-axis muted" aria-hidden="true" data-testid={testId && `${testId}-x-axis`}>
          <span>{points > 0 ? ago(span) : "waiting for heartbeats"}</span>
          <span>now</span>
        </div>
      </div>
      <div className="history-scale muted">
        <output className="history-readout" aria-live="polite" data-testid={testId && `${testId}-readout`}>
          {hoverValue !== null && hoverT !== null ? `${formatClock(hoverT)}: ${format(hoverValue)}` : ""}
        </output>
        <span data-testid={testId && `${testId}-max`}>max {frame.dataMax === null ? "–" : format(frame.dataMax)}</span>
      </div>
    </figure>
  );
}
