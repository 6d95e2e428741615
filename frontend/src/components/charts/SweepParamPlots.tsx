import { type KeyboardEvent, type PointerEvent, useMemo, useState } from "react";
import type { ApiClient, ApiError } from "../../api/client";
import { allSimulations } from "../../api/simulationList";
import { usePanel } from "../../hooks/usePanel";
import { setSearchParams, useSearchParam } from "../../router";
import { type MetricDeclaration, formatMetric, formatMetricWithUnit } from "../../state/metrics";
import {
  type SweepPlot,
  type SweepRun,
  defaultOutcome,
  nearestPlotPoint,
  outcomeChoices,
  paramAxes,
  runsWithoutOutcome,
  sweepPlot,
} from "../../state/sweepPlot";
import type { SweepDetail } from "../../state/sweeps";
import { PanelBody } from "../PanelBody";
import { stepIndex } from "./keyboard";
import { Skeleton } from "../Skeleton";

interface SweepParamPlotsProps {
  client: ApiClient;
  detail: SweepDetail;
  /** Bumped each time the sweep's results were loaded again: the runs' final metrics are read again too. */
  version: number;
  onUnauthorized: (err: ApiError) => void;
}

interface Outcomes {
  /** Each run's last kept round's metrics, by simulation id. */
  metrics: Map<number, Record<string, number | null>>;
  declared: MetricDeclaration[];
}

/** The sweep's runs with their last metrics (one list request), and the declarations of one of them. */
async function loadOutcomes(client: ApiClient, detail: SweepDetail, signal: AbortSignal): Promise<Outcomes> {
  const { simulations } = await allSimulations(client, { filters: { sweep_id: String(detail.id) }, pageSize: 300, signal });
  const metrics = new Map(simulations.map((s) => [s.id, s.last_metrics ?? {}] as const));
  const first = detail.results.items.find((r) => r.simulation_id !== null)?.simulation_id ?? null;
  const declared = first === null ? [] : ((await client.simulation(first, signal)).metrics ?? []);
  return { metrics, declared };
}

/** Outcome against each swept param: a scatter per param, one point per run, its metric chosen. */
export function SweepParamPlots({ client, detail, version, onUnauthorized }: SweepParamPlotsProps) {
  const panel = usePanel((signal) => loadOutcomes(client, detail, signal), [client, detail.id, version], {
    failure: "Could not load the runs' final metrics",
    onUnauthorized,
  });
  // The outcome shown lives in the URL (?outcome=winner_value), so a link shows the same plots.
  const asked = useSearchParam("outcome");
  const axes = useMemo(() => paramAxes(detail.grid), [detail.grid]);

  return (
    <section aria-labelledby="sweep-plots-heading">
      <div className="section-title">
        <h2 id="sweep-plots-heading">Outcome by param</h2>
      </div>
      <PanelBody panel={panel} loading="Loading the runs' final metrics…" skeleton={<Skeleton label="Loading the runs' final metrics…" chart />}>
        {(outcomes) => {
          const runs: SweepRun[] = detail.results.items.map((r) => ({
            point: r.point,
            simulationId: r.simulation_id,
            params: r.params,
            status: r.status,
            metrics: r.simulation_id === null ? undefined : outcomes.metrics.get(r.simulation_id),
          }));
          const choices = outcomeChoices(outcomes.declared, runs);
          const chosen = defaultOutcome(choices, asked);
          const metric = choices.find((m) => m.name === chosen);
          if (!metric) {
            const launched = runs.some((r) => r.simulationId !== null);
            return <p className="empty">{launched ? "The runs declare no metrics to plot." : "The plots fill in as the runs play their rounds."}</p>;
          }
          const missing = runsWithoutOutcome(runs, metric.name);
          return (
            <>
              <div className="filters">
                <div>
                  <label htmlFor="sweep-outcome">Outcome (each run's final value)</label>
                  <select id="sweep-outcome" value={metric.name} onChange={(e) => setSearchParams({ outcome: e.target.value })}>
                    {choices.map((m) => (
                      <option key={m.name} value={m.name}>
                        {m.title}
                      </option>
                    ))}
                  </select>
                </div>
              </div>
              {metric.description && <p className="muted metric-help">{metric.description}</p>}
              {missing > 0 && (
                <p className="muted" data-testid="sweep-plot-missing">
                  {missing} of {runs.length} runs have no {metric.title.toLowerCase()} yet (not launched, or no round kept); hollow points are runs still playing.
                </p>
              )}
              <div className="sweep-plots">
                {axes.map((axis) => (
                  <ParamScatter key={`${axis.key}:${metric.name}`} plot={sweepPlot(axis, runs, metric)} metric={metric} />
                ))}
              </div>
            </>
          );
        }}
      </PanelBody>
    </section>
  );
}

/** One param's scatter, in SVG: hover a point, or focus the plot and step with the arrow keys, to read it. */
function ParamScatter({ plot, metric }: { plot: SweepPlot; metric: MetricDeclaration }) {
  const [chosen, setChosen] = useState<number | null>(null);
  const { axis, points, range } = plot;
  const point = chosen === null ? undefined : points[chosen];
  const title = `${metric.title} by ${axis.key}`;
  const label = points.length === 0 ? `${title}: no run has a value yet` : `${title}: ${points.length} runs; ${summary(plot, metric)}`;
  const xLabels = axis.kind === "number" ? [formatMetric(axis.min, { type: "number" }, 4), formatMetric(axis.max, { type: "number" }, 4)] : axis.categories;

  function onKeyDown(event: KeyboardEvent<HTMLDivElement>) {
    if (event.key === "Escape") return setChosen(null);
    const next = stepIndex(points.length, chosen, event.key);
    if (next === undefined) return;
    event.preventDefault();
    setChosen(next);
  }
  function onPointerMove(event: PointerEvent<HTMLDivElement>) {
    const rect = event.currentTarget.getBoundingClientRect();
    if (rect.width <= 0 || rect.height <= 0) return;
    setChosen(nearestPlotPoint(points, (event.clientX - rect.left) / rect.width, 1 - (event.clientY - rect.top) / rect.height, rect.width / rect.height));
  }

  return (
    <figure className="sweep-plot" data-testid={`sweep-plot-${axis.key}`} data-points={points.length}>
      <figcaption>{title}</figcaption>
      <div className="sweep-plot-body">
        <div className="sweep-plot-y muted" aria-hidden="true">
          <span>{formatMetric(range[1], metric, 3)}</span>
          <span>{formatMetric(range[0], metric, 3)}</span>
        </div>
        {/* Focusable, so the values can be read without a pointer: arrows step, Escape leaves. */}
        <div
          className="sweep-plot-canvas"
          role="group"
          tabIndex={points.length > 0 ? 0 : -1}
          aria-label={`${title}: use the arrow keys to read each run`}
          onKeyDown={onKeyDown}
          onPointerMove={onPointerMove}
          onPointerLeave={() => setChosen(null)}
          onBlur={() => setChosen(null)}
        >
          <svg role="img" aria-label={label}>
            {points.map((p, i) => (
              <circle
                key={p.simulationId}
                className={`sweep-point${p.finished ? "" : " unfinished"}${i === chosen ? " chosen" : ""}`}
                cx={`${inset(p.x)}%`}
                cy={`${100 - inset(p.y)}%`}
                r={i === chosen ? 6 : 4.5}
                transform={p.dodge === 0 ? undefined : `translate(${p.dodge * 8} 0)`}
                data-run={p.simulationId}
                data-point={p.point}
              >
                <title>{pointText(p, axis.key, metric)}</title>
              </circle>
            ))}
          </svg>
        </div>
        <div
          className={`sweep-plot-x muted${axis.kind === "category" ? " categories" : ""}`}
          style={axis.kind === "category" ? { gridTemplateColumns: `repeat(${xLabels.length}, minmax(0, 1fr))` } : undefined}
          aria-hidden="true"
        >
          {xLabels.map((text) => (
            <span key={text} title={text}>
              {text}
            </span>
          ))}
        </div>
      </div>
      <output className="sweep-plot-readout" aria-live="polite" data-testid={`sweep-plot-${axis.key}-readout`}>
        {point ? pointText(point, axis.key, metric) : ""}
      </output>
    </figure>
  );
}

/** 0..1 to a percentage with a margin, so points at the ends are not cut in half. */
function inset(share: number): number {
  return 4 + share * 92;
}

function pointText(p: SweepPlot["points"][number], key: string, metric: MetricDeclaration): string {
  return `Run ${p.simulationId} (point ${p.point}): ${key} = ${p.param}, ${metric.title.toLowerCase()} ${formatMetricWithUnit(p.value, metric)}${p.finished ? "" : " so far"}`;
}

/** The extremes a sighted reader takes from the plot. */
function summary(plot: SweepPlot, metric: MetricDeclaration): string {
  const byValue = [...plot.points].sort((a, b) => a.value - b.value);
  const low = byValue[0];
  const high = byValue[byValue.length - 1];
  if (!low || !high) return "";
  return `lowest ${formatMetricWithUnit(low.value, metric)} at ${plot.axis.key} = ${low.param}, highest ${formatMetricWithUnit(high.value, metric)} at ${plot.axis.key} = ${high.param}`;
}
