import { useEffect, useRef } from "react";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

interface UPlotChartProps {
  /** Options for a given width; read once, when the chart is made. */
  options: (width: number) => uPlot.Options;
  data: uPlot.AlignedData;
  /** What the chart shows, for screen readers (the same numbers are in a table on the page). */
  label: string;
  testId?: string;
}

/**
 * One uPlot chart for the life of the component: new data goes in with setData, a new width
 * with setSize, so a live page never rebuilds its canvas per event. The container counts the
 * charts it made in `data-charts-created` (tests check it stays 1).
 */
export function UPlotChart({ options, data, label, testId }: UPlotChartProps) {
  const container = useRef<HTMLDivElement>(null);
  const chart = useRef<uPlot | null>(null);
  const latest = useRef({ options, data });
  latest.current = { options, data };

  useEffect(() => {
    const element = container.current;
    if (!element) return;
    const width = Math.max(200, element.clientWidth);
    const made = new uPlot(latest.current.options(width), latest.current.data, element);
    chart.current = made;
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
  }, []);

  useEffect(() => {
    chart.current?.setData(data);
  }, [data]);

  return <div ref={container} className="chart" role="img" aria-label={label} data-testid={testId} />;
}
