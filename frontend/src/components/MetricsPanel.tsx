import { memo } from "react";
import type { SimulationRound } from "../api/types";
import { type MetricDeclaration, chartedMetrics, formatMetricWithUnit, metricValue } from "../state/metrics";
import { COMPARTMENTS, hasCompartments } from "../state/networks";
import { CompartmentChart } from "./charts/CompartmentChart";
import { MetricChart } from "./charts/MetricChart";

interface MetricsPanelProps {
  /** The run's declarations (GET /api/simulations/{id} `metrics`); absent from older managers. */
  declared: readonly MetricDeclaration[] | null | undefined;
  /** Every round so far, in order (REST and `round.completed` alike). */
  rounds: readonly SimulationRound[];
  /** The round whose values the captions show (the page's chosen round, else the latest). */
  shown: SimulationRound | undefined;
}

/**
 * The run's declared per-round metrics, one small chart each, drawn from the declarations
 * alone (title, unit, type, description): no code about the simulation that declares them.
 * Absent when the manager declares none or its rounds carry none.
 */
export const MetricsPanel = memo(function MetricsPanel({ declared, rounds, shown }: MetricsPanelProps) {
  const metrics = chartedMetrics(declared, rounds);
  if (metrics.length === 0) return null;
  // An epidemic's three compartments also go on one chart together (sir declares them).
  const compartments = hasCompartments(metrics) ? COMPARTMENTS.map((name) => metrics.find((m) => m.name === name)!) : null;
  return (
    <section aria-labelledby="metrics-heading" data-testid="metrics">
      <div className="section-title">
        <h2 id="metrics-heading">Metrics</h2>
      </div>
      <p className="muted metrics-intro">
        {shown
          ? `What the simulation measures each round; the values are round ${shown.round}'s (choose another round above). Hover a chart for a round's value.`
          : "What the simulation measures each round. No round has completed yet."}
      </p>
      {compartments && (
        <figure className="metric-chart compartment-chart" data-testid="compartments" aria-labelledby="compartments-title">
          <figcaption>
            <span id="compartments-title" className="metric-title">
              Compartments: {compartments.map((m) => m.title).join(", ")}
            </span>
            {shown && (
              <span className="metric-value" data-testid="compartment-values">
                <span className="muted">round {shown.round}: </span>
                {compartments.map((m, i) => (
                  <span key={m.name}>
                    {i > 0 && " · "}
                    {m.title} <strong>{formatMetricWithUnit(metricValue(shown, m.name), m)}</strong>
                  </span>
                ))}
              </span>
            )}
          </figcaption>
          <CompartmentChart metrics={compartments} rounds={rounds} />
        </figure>
      )}
      <div className="metric-charts">
        {metrics.map((metric) => {
          const titleId = `metric-${metric.name}-title`;
          const helpId = `metric-${metric.name}-help`;
          const value = metricValue(shown, metric.name);
          return (
            <figure
              key={metric.name}
              className="metric-chart"
              data-testid={`metric-${metric.name}`}
              data-metric-type={metric.type}
              aria-labelledby={titleId}
              aria-describedby={metric.description ? helpId : undefined}
            >
              <figcaption>
                <span id={titleId} className="metric-title">
                  {metric.title}
                </span>
                {shown && (
                  <span className="metric-value" data-testid="metric-value" data-round={shown.round} data-value={value ?? ""}>
                    <span className="muted">round {shown.round}: </span>
                    <strong>{formatMetricWithUnit(value, metric)}</strong>
                  </span>
                )}
              </figcaption>
              {metric.description && (
                <p id={helpId} className="muted metric-help">
                  {metric.description}
                </p>
              )}
              <MetricChart metric={metric} rounds={rounds} />
            </figure>
          );
        })}
      </div>
    </section>
  );
});
