import { useMemo } from "react";
import uPlot from "uplot";
import { formatNumber, histogramBins } from "../../state/simulations";
import { UPlotChart } from "./UPlotChart";

const HEIGHT = 220;

function makeOptions(width: number, min: number, max: number, valueName: string): uPlot.Options {
  return {
    width,
    height: HEIGHT,
    scales: { x: { time: false, range: [min, max] }, y: { auto: true, range: (_u, _min, max) => [0, Math.max(1, max) * 1.05] } },
    axes: [{ label: valueName }, { label: "Agents" }],
    legend: { show: false },
    cursor: { points: { show: false } },
    series: [
      { label: "Bin" },
      {
        label: "Agents",
        fill: "rgba(51, 85, 209, 0.55)",
        stroke: "#3355d1",
        width: 1,
        points: { show: false },
        paths: uPlot.paths.bars?.({ size: [1, Infinity], align: 0 }),
        value: (_u, v) => (v === null ? "–" : String(v)),
      },
    ],
  };
}

/** What was binned, as the axis and the readout name it. */
const NOUNS = { guess: { one: "Guess", many: "Guesses" }, value: { one: "Value", many: "Values" } } as const;

/**
 * A round's histogram, drawn from the bin counts the server merged (never from decisions).
 * `noun`: guesses in the guessing game, values for other plugins.
 */
export function HistogramChart({ counts, min, max, label, noun = "guess" }: { counts: readonly number[]; min: number; max: number; label: string; noun?: keyof typeof NOUNS }) {
  const valueName = NOUNS[noun].one;
  const bins = counts.length;
  const { centers, width } = useMemo(() => histogramBins(min, max, bins), [min, max, bins]);
  // Read from the keyboard as "Guesses 12.5–15: Agents 42": a bin by its range.
  const readout = useMemo(
    () => [{ label: NOUNS[noun].many, format: (center: number) => `${formatNumber(center - width / 2)}–${formatNumber(center + width / 2)}` }, { label: "Agents" }],
    [width, noun],
  );
  const data = useMemo(() => [centers, [...counts]] as uPlot.AlignedData, [centers, counts]);
  const options = useMemo(() => (width: number) => makeOptions(width, min, max, valueName), [min, max, valueName]);
  // The bin layout is fixed for a simulation; should it change, a new chart is made for it.
  return <UPlotChart key={`${min}:${max}:${bins}:${valueName}`} options={options} data={data} label={label} testId="histogram-chart" readout={readout} />;
}
