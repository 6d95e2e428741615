import { type KeyboardEvent, useEffect, useRef, useState } from "react";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { fitTickLabels } from "./axes";
import { type ReadoutSeries, describePoint, stepIndex } from "./keyboard";
import { extent, forLogScale, zoomRange } from "./zoom";

interface UPlotChartProps {
  /** Options for a given width; read once, when the chart is made. */
  options: (width: number) => uPlot.Options;
  data: uPlot.AlignedData;
  /** What the chart shows, for screen readers (the same numbers are in a table on the page). */
  label: string;
  testId?: string;
  /** The zoom and log-scale toolbar (on unless false: small multiples leave it out). */
  tools?: boolean;
  /**
   * How each series reads (x first). Given, the chart is a keyboard stop: the arrow keys move
   * from point to point and a readout under it says the values there (as it does on hover).
   */
  readout?: readonly ReadoutSeries[];
}

/** Colours of the page (styles.css variables), so axes and grid follow the light or dark palette. */
function themed(options: uPlot.Options, element: HTMLElement): uPlot.Options {
  const style = getComputedStyle(element);
  const text = style.getPropertyValue("--text").trim() || "#1d2330";
  const grid = style.getPropertyValue("--border").trim() || "#dde1e7";
  return {
    ...options,
    axes: (options.axes ?? []).map((axis, i) => ({ stroke: text, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 }, ...(i > 0 ? { size: fitTickLabels } : {}), ...axis })),
  };
}

/**
 * One uPlot chart for the life of the component: new data goes in with setData, a new width
 * with setSize, so a live page never rebuilds its canvas per event. The container counts the
 * charts it made in `data-charts-created` (tests check it stays 1; switching the y axis to a
 * log scale makes a new one).
 *
 * Zoom: drag across the plot to show a range of x (uPlot's own selection), or the +/- buttons;
 * Reset shows everything again. A zoomed chart keeps its range as new data arrives.
 */
export function UPlotChart({ options, data, label, testId, tools = true, readout }: UPlotChartProps) {
  const container = useRef<HTMLDivElement>(null);
  const chart = useRef<uPlot | null>(null);
  const zoomed = useRef(false);
  const [isZoomed, setIsZoomed] = useState(false);
  const [log, setLog] = useState(false);
  // The point under the cursor (the pointer's or the keyboard's), for the readout.
  const [point, setPoint] = useState<number | null>(null);
  const latest = useRef({ options, data, log });
  latest.current = { options, data, log };

  const plotted = (d: uPlot.AlignedData, logScale: boolean) => (logScale ? (forLogScale(d as unknown as ArrayLike<number | null>[]) as unknown as uPlot.AlignedData) : d);

  useEffect(() => {
    const element = container.current;
    if (!element) return;
    const width = Math.max(200, element.clientWidth);
    const base = themed(latest.current.options(width), element);
    const markZoomed = (on: boolean) => {
      zoomed.current = on;
      setIsZoomed(on);
    };
    const withScale: uPlot.Options = {
      ...base,
      // A log axis has no 0: its own auto range, not the linear chart's range function.
      scales: { ...base.scales, y: log ? { distr: 3, auto: true } : (base.scales?.y ?? { auto: true }) },
      hooks: {
        ...base.hooks,
        setSelect: [...(base.hooks?.setSelect ?? []), (u: uPlot) => u.select.width > 0 && markZoomed(true)],
        setCursor: [...(base.hooks?.setCursor ?? []), (u: uPlot) => setPoint(u.cursor.idx ?? null)],
      },
    };
    const made = new uPlot(withScale, plotted(latest.current.data, log), element);
    chart.current = made;
    markZoomed(false);
    element.dataset.chartsCreated = String(Number(element.dataset.chartsCreated ?? "0") + 1);
    const observer = new ResizeObserver(() => {
      const next = Math.max(200, element.clientWidth);
      if (next !== made.width) made.setSize({ width: next, height: made.height });
    });
    observer.observe(element);
    return () => {
      observer.disconnect();
      made.destroy();
      chart.current = null;
    };
  }, [log]);

  useEffect(() => {
    // A zoomed chart keeps the range the reader chose; otherwise the scales follow the data.
    chart.current?.setData(plotted(data, latest.current.log), !zoomed.current);
  }, [data]);

  function zoom(factor: number) {
    const u = chart.current;
    const full = extent(latest.current.data[0] as ArrayLike<number>);
    const { min, max } = u?.scales.x ?? {};
    if (!u || !full || min === undefined || max === undefined || min === null || max === null) return;
    const [lo, hi] = zoomRange([min, max], full, factor);
    zoomed.current = true;
    setIsZoomed(true);
    u.setScale("x", { min: lo, max: hi });
  }

  function reset() {
    const u = chart.current;
    zoomed.current = false;
    setIsZoomed(false);
    u?.setData(u.data, true);
  }

  /** Puts the chart's cursor on point `index` (null hides it), as if the pointer were there. */
  function showPoint(index: number | null) {
    const u = chart.current;
    if (!u) return;
    const x = index === null ? undefined : u.data[0][index];
    if (index === null || x === undefined || x === null) {
      u.setCursor({ left: -10, top: -10 });
      return;
    }
    const y = u.data.slice(1).map((s) => s[index]).find((v) => v !== null && v !== undefined);
    const top = y === undefined || y === null ? u.bbox.height / (2 * (window.devicePixelRatio || 1)) : u.valToPos(y, "y");
    u.setCursor({ left: u.valToPos(x, "x"), top });
  }

  function onKeyDown(event: KeyboardEvent<HTMLDivElement>) {
    if (event.key === "Escape") return showPoint(null);
    const count = (latest.current.data[0] as ArrayLike<number>).length;
    const next = stepIndex(count, point, event.key);
    if (next === undefined) return;
    event.preventDefault();
    showPoint(next);
  }

  const keyboard = readout
    ? {
        role: "group",
        tabIndex: 0,
        "aria-label": `${label}. Use the arrow keys to read each point.`,
        onKeyDown,
        onFocus: () => point === null && showPoint(stepIndex((latest.current.data[0] as ArrayLike<number>).length, null, "End") ?? null),
        onBlur: () => showPoint(null),
      }
    : { role: "img", "aria-label": label };
  const readoutText = readout && point !== null ? describePoint(latest.current.data as unknown as ArrayLike<number | null>[], readout, point) : "";

  return (
    <div className="chart-frame">
      {tools && (
        <div className="chart-tools" role="toolbar" aria-label={`${testId ?? "chart"} zoom`}>
          <button type="button" className="button plain small" aria-label="Zoom in" title="Zoom in (or drag across the chart)" onClick={() => zoom(0.5)}>
            +
          </button>
          <button type="button" className="button plain small" aria-label="Zoom out" title="Zoom out" onClick={() => zoom(2)}>
            −
          </button>
          <button type="button" className="button plain small" disabled={!isZoomed} onClick={reset}>
            Reset zoom
          </button>
          <label className="checkbox small">
            <input type="checkbox" checked={log} onChange={(e) => setLog(e.target.checked)} />
            Log scale
          </label>
        </div>
      )}
      <div ref={container} className="chart" {...keyboard} data-testid={testId} data-zoomed={isZoomed ? "true" : "false"} data-log={log ? "true" : "false"} />
      {readout && (
        <output className="chart-readout" aria-live="polite" data-testid={testId && `${testId}-readout`}>
          {readoutText}
        </output>
      )}
    </div>
  );
}
