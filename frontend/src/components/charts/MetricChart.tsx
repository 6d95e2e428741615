import { useMemo } from "react";
import type uPlot from "uplot";
import { INTEGER_STEPS, type MetricDeclaration, type RoundValues, formatMetric, formatMetricWithUnit, metricChartLabel, metricRange, metricSeries } from "../../state/metrics";
import { UPlotChart } from "./UPlotChart";

const HEIGHT = 180;

/** The page's accent colour (styles.css), so the line keeps its contrast in light and dark mode. */
function accent(): string {
  return getComputedStyle(document.documentElement).getPropertyValue("--accent").trim() || "#3355d1";
}

function makeOptions(width: number, metric: MetricDeclaration): uPlot.Options {
  const integer = metric.type === "integer";
  const unit = metric.unit?.trim();
  const stroke = accent();
  return {
    width,
    height: HEIGHT,
    scales: { x: { time: false }, y: { range: (_u, min, max) => metricRange(min, max, integer) } },
    axes: [
      { label: "Round", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500], values: (_u, ticks) => ticks.map((t) => String(t)) },
      {
        ...(unit ? { label: unit } : {}),
        space: 22,
        ...(integer ? { incrs: [...INTEGER_STEPS] } : {}),
        values: (_u, ticks) => ticks.map((t) => formatMetric(t, metric, 4)),
      },
    ],
    // Hovering shows the round and its value (with the unit) in the legend: the tooltip. The
    // round series' own legend entry is hidden (styles.css): the value names its round.
    legend: { live: true },
    // Small multiples: an overview, no zoom (its toolbar is left out too).
    cursor: { drag: { x: false, y: false, setScale: false } },
    series: [
      { label: "Round", value: (_u, v) => (v === null || v === undefined ? "–" : String(v)) },
      {
        label: metric.title,
        stroke,
        width: 2,
        // A round without a value is a gap in the line, never a 0.
        spanGaps: false,
        points: { size: 5, fill: stroke },
        value: (u, v, _series, idx) => {
          const round = idx === null || idx === undefined ? undefined : u.data[0][idx];
          return v === null || v === undefined || round === undefined ? "–" : `${formatMetricWithUnit(v, metric)} (round ${round})`;
        },
      },
    ],
  };
}

/**
 * One declared metric over the rounds: a compact line chart named by the metric. `testId`
 * tells apart charts of the same metric on one page (the run's and a group's).
 */
export function MetricChart({ metric, rounds, testId }: { metric: MetricDeclaration; rounds: readonly RoundValues[]; testId?: string }) {
  const data = useMemo(() => metricSeries(rounds, metric.name) as unknown as uPlot.AlignedData, [rounds, metric.name]);
  const options = useMemo(() => (width: number) => makeOptions(width, metric), [metric]);
  const label = metricChartLabel(metric, rounds);
  const readout = useMemo(() => [{ label: "Round" }, { label: metric.title, format: (v: number) => formatMetricWithUnit(v, metric) }], [metric]);
  // Options are read once per chart: a changed declaration makes a new one.
  return <UPlotChart key={`${metric.name}:${metric.type}:${metric.unit}:${metric.title}`} options={options} data={data} label={label} testId={testId ?? `metric-chart-${metric.name}`} tools={false} readout={readout} />;
}
