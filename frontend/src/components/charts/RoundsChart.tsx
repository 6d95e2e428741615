import { useMemo } from "react";
import type uPlot from "uplot";
import type { SimulationRound } from "../../api/types";
import { formatNumber, roundSeries } from "../../state/simulations";
import { UPlotChart } from "./UPlotChart";

const HEIGHT = 260;
/** What the keyboard readout names (the series of options(), in order). */
const READOUT = [{ label: "Round" }, { label: "Mean" }, { label: "Target" }, { label: "Winner" }, { label: "Equilibrium" }];

function options(width: number): uPlot.Options {
  return {
    width,
    height: HEIGHT,
    scales: { x: { time: false }, y: { auto: true } },
    axes: [
      { label: "Round", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500], values: (_u, ticks) => ticks.map((t) => String(t)) },
      { label: "Value" },
    ],
    legend: { live: true },
    series: [
      { label: "Round" },
      { label: "Mean", stroke: "#3355d1", width: 2, points: { show: true, size: 6 } },
      { label: "Target", stroke: "#d9901a", width: 2, dash: [6, 4], points: { show: true, size: 5 } },
      { label: "Winner", stroke: "#27a55a", width: 0, points: { show: true, size: 7, fill: "#27a55a" } },
      { label: "Equilibrium", stroke: "#a4262c", width: 1.5, dash: [2, 4], points: { show: false } },
    ],
  };
}

/** Mean, target and winning number over the rounds, with the equilibrium as a reference line. */
export function RoundsChart({ rounds, equilibrium }: { rounds: readonly SimulationRound[]; equilibrium: number | null }) {
  const data = useMemo(() => roundSeries(rounds, equilibrium) as unknown as uPlot.AlignedData, [rounds, equilibrium]);
  const last = rounds[rounds.length - 1];
  const label = last
    ? `Mean, target and winner over ${rounds.length} rounds; round ${last.round}: mean ${formatNumber(last.mean)}, target ${formatNumber(last.target)}, winner ${formatNumber(last.winner_value)}; equilibrium ${formatNumber(equilibrium)}`
    : "No rounds yet";
  return <UPlotChart options={options} data={data} label={label} testId="rounds-chart" readout={READOUT} />;
}
