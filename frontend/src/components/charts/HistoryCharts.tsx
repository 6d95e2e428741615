import { useMemo } from "react";
import type { HistoryPoint } from "../../api/types";
import { formatBytes, formatPercent } from "../../format";
import { formatRate, seriesOf } from "../../state/history";
import { TimeSeriesChart } from "./TimeSeriesChart";

interface HistoryChartsProps {
  points: readonly HistoryPoint[];
  bucketS: number;
  /** Prefixes the charts' test ids: `${prefix}-cpu`, `-rss`, `-agents`, `-llm`. */
  prefix: string;
  /** The cluster's CPU is a sum over processes (200 % = two busy cores). */
  cpuTitle?: string;
}

const formatCount = (value: number) => Math.round(value).toLocaleString("en-US");

/** CPU, memory, agents and LLM requests per second over the history's window, side by side. */
export function HistoryCharts({ points, bucketS, prefix, cpuTitle = "CPU" }: HistoryChartsProps) {
  const cpu = useMemo(() => seriesOf(points, "cpu_percent"), [points]);
  const rss = useMemo(() => seriesOf(points, "rss_bytes"), [points]);
  const agents = useMemo(() => seriesOf(points, "agents"), [points]);
  const llm = useMemo(() => seriesOf(points, "llm_requests_per_s"), [points]);
  return (
    <div className="history-charts">
      <TimeSeriesChart title={cpuTitle} series={cpu} format={formatPercent} bucketS={bucketS} testId={`${prefix}-cpu`} />
      <TimeSeriesChart title="Memory (RSS)" series={rss} format={formatBytes} bucketS={bucketS} testId={`${prefix}-rss`} />
      <TimeSeriesChart title="Agents" series={agents} format={formatCount} bucketS={bucketS} testId={`${prefix}-agents`} />
      <TimeSeriesChart title="LLM requests" series={llm} format={formatRate} bucketS={bucketS} testId={`${prefix}-llm`} />
    </div>
  );
}
