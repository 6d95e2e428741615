import { useEffect, useMemo, useState } from "react";
import type uPlot from "uplot";
import { type ApiClient, type ApiError, errorMessage, isUnauthorized } from "../api/client";
import type { SimulationDetail, SimulationRound } from "../api/types";
import { UPlotChart } from "../components/charts/UPlotChart";
import { Link } from "../components/Link";
import { PopulationName, usePopulations } from "../components/PopulationName";
import { StateBadge } from "../components/StateBadge";
import { Clip, TableScroll } from "../components/TableScroll";
import { useSearchParam } from "../router";
import { configDiff, CURVES, overlaySeries, parseCompareIds, runColor, segmentComparison } from "../state/compare";
import { formatDuration, runSpan } from "../state/meters";
import { describeRule, formatNumber, guessParams, resolveRule } from "../state/simulations";

interface ComparePageProps {
  client: ApiClient;
  onUnauthorized: (err: ApiError) => void;
}

interface LoadedRun {
  id: number;
  simulation: SimulationDetail | null;
  rounds: SimulationRound[];
  error: string | null;
}

/** Mean solid, target dashed, winner as dots: one color per run. */
function chartOptions(runs: ReadonlyArray<{ id: number; name: string }>): (width: number) => uPlot.Options {
  const series: uPlot.Series[] = [{ label: "Round" }];
  runs.forEach((run, i) => {
    const stroke = runColor(i);
    for (const curve of CURVES) {
      const label = `#${run.id} ${curve.label}`;
      if (curve.key === "mean") series.push({ label, stroke, width: 2, points: { show: true, size: 5 }, spanGaps: false });
      else if (curve.key === "target") series.push({ label, stroke, width: 1.5, dash: [6, 4], points: { show: false } });
      else series.push({ label, stroke, width: 0, points: { show: true, size: 6, fill: stroke } });
    }
  });
  return (width: number) => ({
    width,
    height: 300,
    scales: { x: { time: false }, y: { auto: true } },
    axes: [
      { label: "Round", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500], values: (_u, ticks) => ticks.map((t) => String(t)) },
      { label: "Value" },
    ],
    legend: { live: true },
    series,
  });
}

/** Runs side by side (`/compare?ids=1,2,3`): their curves on one chart, segment means, and how their configs differ. */
export function ComparePage({ client, onUnauthorized }: ComparePageProps) {
  const idsParam = useSearchParam("ids");
  const ids = useMemo(() => parseCompareIds(idsParam), [idsParam]);
  const idsKey = ids.join(",");
  const [runs, setRuns] = useState<LoadedRun[] | null>(null);
  const [showAll, setShowAll] = useState(false);

  useEffect(() => {
    document.title = `Compare ${idsKey ? `runs ${idsKey}` : "runs"} · populace`;
  }, [idsKey]);

  useEffect(() => {
    const controller = new AbortController();
    setRuns(null);
    const wanted = idsKey ? idsKey.split(",").map(Number) : [];
    void Promise.all(
      wanted.map(async (id): Promise<LoadedRun> => {
        try {
          const [simulation, rounds] = await Promise.all([client.simulation(id, controller.signal), client.allRounds(id, controller.signal)]);
          return { id, simulation, rounds: [...rounds].sort((a, b) => a.round - b.round), error: null };
        } catch (err) {
          if (isUnauthorized(err)) onUnauthorized(err);
          const missing = (err as ApiError).status === 404;
          return { id, simulation: null, rounds: [], error: missing ? `Simulation ${id} does not exist.` : `Could not load simulation ${id}: ${errorMessage(err)}` };
        }
      }),
    ).then((loaded) => {
      if (!controller.signal.aborted) setRuns(loaded);
    });
    return () => controller.abort();
  }, [client, idsKey, onUnauthorized]);

  const shown = useMemo(() => (runs ?? []).filter((r): r is LoadedRun & { simulation: SimulationDetail } => r.simulation !== null), [runs]);
  const data = useMemo(() => {
    const { x, series } = overlaySeries(shown.map((r) => r.rounds));
    return [x, ...series] as unknown as uPlot.AlignedData;
  }, [shown]);
  const populationIds = useMemo(() => shown.map((r) => r.simulation.population_id), [shown]);
  const populations = usePopulations(client, populationIds, onUnauthorized);
  const options = useMemo(() => chartOptions(shown.map((r) => ({ id: r.id, name: r.simulation.name }))), [shown]);
  const diff = useMemo(() => configDiff(shown.map((r) => r.simulation.config)), [shown]);
  const differing = diff.filter((row) => row.differs);
  const rows = showAll ? diff : differing;
  const segments = useMemo(() => segmentComparison(shown.map((r) => r.rounds[r.rounds.length - 1])), [shown]);
  const chartLabel = `Mean, target and winner over rounds of ${shown.map((r) => `simulation ${r.id} (${r.rounds.length} rounds)`).join(", ")}`;

  return (
    <main className="page">
      <p className="breadcrumb">
        <Link href="/simulations">Simulations</Link> /
      </p>
      <div className="page-title">
        <h1>Compare runs</h1>
      </div>
      {ids.length < 2 && (
        <p className="empty">
          Pick two or more runs to compare: tick them on <Link href="/simulations">the simulations list</Link> and choose Compare selected.
        </p>
      )}
      {runs === null && ids.length > 0 && <p className="empty">Loading runs…</p>}
      {runs?.map(
        (r) =>
          r.error !== null && (
            <p key={r.id} className="alert" role="alert">
              {r.error}
            </p>
          ),
      )}

      {shown.length > 0 && (
        <>
          <section aria-labelledby="compared-runs-heading">
            <h2 id="compared-runs-heading">Runs</h2>
            <TableScroll label="Compared runs" pinFirst>
              <table className="data" aria-label="Compared runs">
                <thead>
                  <tr>
                    <th scope="col">Run</th>
                    <th scope="col">Population</th>
                    <th scope="col">Status</th>
                    <th scope="col">Rule</th>
                    <th scope="col">Policy</th>
                    <th scope="col">Seed</th>
                    <th scope="col">Rounds</th>
                    <th scope="col">Last mean</th>
                    <th scope="col">Duration</th>
                  </tr>
                </thead>
                <tbody>
                  {shown.map((r, i) => {
                    const last = r.rounds[r.rounds.length - 1];
                    return (
                      <tr key={r.id} aria-label={`Run ${r.id}`}>
                        <td>
                          <span className="run-name-cell">
                            <span className="run-swatch" style={{ background: runColor(i) }} aria-hidden="true" />
                            <Clip text={`${r.simulation.name} #${r.id}`}>
                              <Link href={`/simulations/${r.id}`}>{r.simulation.name}</Link> <span className="muted">#{r.id}</span>
                            </Clip>
                          </span>
                        </td>
                        <td>
                          <PopulationName id={r.simulation.population_id} population={populations.get(r.simulation.population_id)} />
                        </td>
                        <td>
                          <StateBadge state={r.simulation.status} />
                        </td>
                        <td>{describeRule(resolveRule(guessParams(r.simulation.config).rule))}</td>
                        <td>{r.simulation.config.policy.kind}</td>
                        <td className="mono">{r.simulation.seed}</td>
                        <td className="num">{r.rounds.length}</td>
                        <td className="num">{formatNumber(last?.mean)}</td>
                        <td className="num">{formatDuration(runSpan(r.simulation, Date.now()).seconds)}</td>
                      </tr>
                    );
                  })}
                </tbody>
              </table>
            </TableScroll>
          </section>

          <section aria-labelledby="compare-chart-heading">
            <h2 id="compare-chart-heading">Mean, target and winner over rounds</h2>
            <p className="muted">Per run: mean solid, target dashed, winning number as dots.</p>
            <UPlotChart key={shown.map((r) => r.id).join(",")} options={options} data={data} label={chartLabel} testId="compare-chart" />
          </section>

          <section aria-labelledby="compare-segments-heading">
            <h2 id="compare-segments-heading">Means by segment, last round of each run</h2>
            {segments.length === 0 && <p className="empty">None of these runs breaks its statistics down by an attribute.</p>}
            <div className="segment-tables">
              {segments.map(({ attribute, rows: categories }) => (
                <TableScroll key={attribute} label={`Means by ${attribute} per run`} pinFirst>
                  <table className="data" aria-label={`Means by ${attribute} per run`}>
                    <thead>
                      <tr>
                        <th scope="col">{attribute}</th>
                        {shown.map((r) => (
                          <th scope="col" key={r.id}>
                            #{r.id} mean
                          </th>
                        ))}
                      </tr>
                    </thead>
                    <tbody>
                      {categories.map((row) => (
                        <tr key={row.category} aria-label={row.category}>
                          <th scope="row">{row.category}</th>
                          {row.means.map((mean, i) => (
                            <td className="num" key={shown[i]?.id ?? i} title={row.counts[i] !== null ? `${row.counts[i]} agents` : undefined}>
                              {formatNumber(mean)}
                            </td>
                          ))}
                        </tr>
                      ))}
                    </tbody>
                  </table>
                </TableScroll>
              ))}
            </div>
          </section>

          <section aria-labelledby="config-diff-heading">
            <div className="section-title">
              <h2 id="config-diff-heading">Config differences</h2>
              <label className="config-diff-toggle push-right">
                <input type="checkbox" checked={showAll} onChange={(e) => setShowAll(e.target.checked)} /> Show all paths
              </label>
            </div>
            <p className="muted">
              {differing.length === 0 ? "The configs are the same." : `${differing.length} of ${diff.length} paths differ.`}
            </p>
            {rows.length > 0 && (
              <TableScroll label="Config differences" pinFirst>
                <table className="data" aria-label="Config differences">
                  <thead>
                    <tr>
                      <th scope="col">Path</th>
                      {shown.map((r) => (
                        <th scope="col" key={r.id}>
                          #{r.id}
                        </th>
                      ))}
                    </tr>
                  </thead>
                  <tbody>
                    {rows.map((row) => (
                      <tr key={row.path} aria-label={row.path} className={row.differs ? "differs" : undefined} data-differs={row.differs}>
                        <th scope="row" className="mono">
                          <Clip text={row.path} />
                        </th>
                        {row.values.map((value, i) => (
                          <td className="mono" key={shown[i]?.id ?? i}>
                            {value === null ? <span className="muted">(absent)</span> : <Clip text={value} className="narrow" />}
                          </td>
                        ))}
                      </tr>
                    ))}
                  </tbody>
                </table>
              </TableScroll>
            )}
          </section>
        </>
      )}
    </main>
  );
}
