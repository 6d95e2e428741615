import { useMemo } from "react";
import type { ApiClient, ApiError } from "../api/client";
import { useFetched } from "../hooks/useFetched";
import { seriesRounds } from "../state/groups";
import type { MetricDeclaration } from "../state/metrics";
import { MetricChart } from "./charts/MetricChart";
import { ErrorAlert } from "./ErrorAlert";
import { Skeleton } from "./Skeleton";

interface GroupSeriesChartsProps {
  client: ApiClient;
  simulationId: number;
  group: number;
  columns: readonly MetricDeclaration[];
  /** The run's latest round: a new one loads the series again (it grew by a round). */
  latestRound: number | null;
  onClose: () => void;
  onUnauthorized: (err: ApiError) => void;
}

/** One group's metrics over the rounds, a small chart each (the run's metric charts). */
export function GroupSeriesCharts({ client, simulationId, group, columns, latestRound, onClose, onUnauthorized }: GroupSeriesChartsProps) {
  const { data: series, error } = useFetched(
    (signal) => client.groupSeries(simulationId, group, signal),
    [client, simulationId, group, latestRound],
    { failure: `Could not load group ${group}'s rounds`, onUnauthorized },
  );
  const rounds = useMemo(() => seriesRounds(series), [series]);
  const headingId = "group-series-heading";
  const label = series?.label ? ` (${series.label})` : "";
  return (
    <section className="group-series" aria-labelledby={headingId} data-testid="group-series" data-group={group} data-rounds={series ? rounds.length : ""}>
      <div className="section-title">
        <h3 id={headingId}>
          Group {group}
          {label} over the rounds
        </h3>
        <button type="button" className="button plain small push-right" onClick={onClose}>
          Close
        </button>
      </div>
      <ErrorAlert message={error} />
      {!series && error === null && <Skeleton label={`Loading group ${group}'s rounds…`} chart />}
      {series && (
        <div className="metric-charts">
          {columns.map((metric) => (
            <figure key={metric.name} className="metric-chart" aria-labelledby={`group-metric-${metric.name}-title`} data-testid={`group-metric-${metric.name}`}>
              <figcaption>
                <span id={`group-metric-${metric.name}-title`} className="metric-title">
                  {metric.title}
                </span>
              </figcaption>
              <MetricChart metric={metric} rounds={rounds} testId={`group-chart-${metric.name}`} />
            </figure>
          ))}
        </div>
      )}
    </section>
  );
}
