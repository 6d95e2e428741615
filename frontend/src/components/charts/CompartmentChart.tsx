import { useMemo } from "react";
import type uPlot from "uplot";
import type { SimulationRound } from "../../api/types";
import { INTEGER_STEPS, type MetricDeclaration, formatMetricWithUnit, metricRange, metricValue } from "../../state/metrics";
import { CATEGORY_COLOURS } from "../../state/networks";
import { UPlotChart } from "./UPlotChart";

const HEIGHT = 240;

function makeOptions(width: number, metrics: readonly MetricDeclaration[]): uPlot.Options {
  const integer = metrics.every((m) => m.type === "integer");
  const unit = metrics[0]?.unit?.trim();
  return {
    width,
    height: HEIGHT,
    scales: { x: { time: false }, y: { range: (_u, min, max) => metricRange(Math.min(0, min), max, integer) } },
    axes: [
      { label: "Round", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500], values: (_u, ticks) => ticks.map((t) => String(t)) },
      { ...(unit ? { label: unit } : {}), ...(integer ? { incrs: [...INTEGER_STEPS] } : {}), values: (_u, ticks) => ticks.map((t) => t.toLocaleString("en-US")) },
    ],
    legend: { live: true },
    cursor: { drag: { x: false, y: false, setScale: false } },
    series: [
      { label: "Round" },
      ...metrics.map((metric, i) => ({
        label: metric.title,
        stroke: CATEGORY_COLOURS[i % CATEGORY_COLOURS.length],
        width: 2,
        spanGaps: false,
        points: { show: false },
        value: (_u: uPlot, v: number | null) => (v === null || v === undefined ? "–" : formatMetricWithUnit(v, metric)),
      })),
    ],
  };
}

/**
 * An epidemic's compartments (susceptible, infectious, recovered) together: one chart, a line
 * each, so that the wave and what it leaves behind read at a glance. The same declared metrics
 * keep their own small charts too.
 */
export function CompartmentChart({ metrics, rounds }: { metrics: readonly MetricDeclaration[]; rounds: readonly SimulationRound[] }) {
  const data = useMemo(
    () => [rounds.map((r) => r.round), ...metrics.map((m) => rounds.map((r) => metricValue(r, m.name)))] as unknown as uPlot.AlignedData,
    [rounds, metrics],
  );
  const options = useMemo(() => (width: number) => makeOptions(width, metrics), [metrics]);
  const readout = useMemo(() => [{ label: "Round" }, ...metrics.map((m) => ({ label: m.title, format: (v: number) => formatMetricWithUnit(v, m) }))], [metrics]);
  const label = compartmentLabel(metrics, rounds);
  const key = metrics.map((m) => `${m.name}:${m.title}:${m.unit}`).join("|");
  return <UPlotChart key={key} options={options} data={data} label={label} testId="compartment-chart" tools={false} readout={readout} />;
}

/** "Susceptible, Infectious and Recovered over 30 rounds; round 30: …; Infectious peaked at 80 (round 6)". */
export function compartmentLabel(metrics: readonly MetricDeclaration[], rounds: readonly SimulationRound[]): string {
  const titles = metrics.map((m) => m.title);
  const names = titles.length > 1 ? `${titles.slice(0, -1).join(", ")} and ${titles[titles.length - 1]}` : (titles[0] ?? "");
  const last = rounds[rounds.length - 1];
  if (!last) return `${names}: no rounds yet`;
  const now = metrics.map((m) => `${m.title} ${formatMetricWithUnit(metricValue(last, m.name), m)}`).join(", ");
  let peak: { round: number; value: number } | null = null;
  const middle = metrics[1];
  if (middle) {
    for (const r of rounds) {
      const v = metricValue(r, middle.name);
      if (v !== null && (!peak || v > peak.value)) peak = { round: r.round, value: v };
    }
  }
  const peakText = peak && middle ? `; ${middle.title} peaked at ${formatMetricWithUnit(peak.value, middle)} (round ${peak.round})` : "";
  return `${names} over ${rounds.length} ${rounds.length === 1 ? "round" : "rounds"}; round ${last.round}: ${now}${peakText}`;
}
