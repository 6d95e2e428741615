import { type KeyboardEvent, useCallback, useEffect, useMemo, useRef, useState } from "react";
import type uPlot from "uplot";
import { type ApiClient, type ApiError, errorMessage, isUnauthorized } from "../api/client";
import { allRounds } from "../api/rounds";
import type { SimulationDetail, SimulationRound } from "../api/types";
import { stepIndex } from "../components/charts/keyboard";
import { UPlotChart } from "../components/charts/UPlotChart";
import { Link } from "../components/Link";
import { PopulationName, usePopulations } from "../components/PopulationName";
import { Skeleton } from "../components/Skeleton";
import { StateBadge } from "../components/StateBadge";
import { Clip, TableScroll } from "../components/TableScroll";
import { setSearchParams, useSearchParam } from "../router";
import {
  type Curve,
  compareCurves,
  curveStyle,
  LOAD_CONCURRENCY,
  type ReadoutRun,
  type RunOutcome,
  compareNotice,
  configDiff,
  chosenCurves,
  mapLimit,
  overlaySeries,
  readCompareIds,
  readoutAt,
  runColor,
  segmentComparison,
} from "../state/compare";
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
  /** Why it is not shown: it does not exist, or it could not be loaded (Retry loads it again). */
  missing: boolean;
  error: string | null;
}

type ComparedRun = LoadedRun & { simulation: SimulationDetail };

/** How curveStyle's lines read, in its order. */
const STYLE_NAMES = ["solid", "dashed", "as dots", "dotted", "dash-dotted"];

/** Per run one colour; per chosen metric a line style (solid, dashed, dots, …). No uPlot
 * legend: the readout under the chart lists only the values the hovered round has. */
function chartOptions(runs: ReadonlyArray<{ id: number }>, curves: readonly Curve[], onCursor: (idx: number | null) => void, onReady: (u: uPlot) => void): (width: number) => uPlot.Options {
  const series: uPlot.Series[] = [{ label: "Round" }];
  runs.forEach((run, i) => {
    const stroke = runColor(i);
    curves.forEach((curve, c) => {
      const style = curveStyle(c);
      series.push({
        label: `#${run.id} ${curve.title}`,
        stroke,
        width: style.width,
        ...(style.dash ? { dash: style.dash } : {}),
        points: style.points ? { show: true, size: style.width === 0 ? 6 : 5, fill: stroke } : { show: false },
        spanGaps: false,
      });
    });
  });
  return (width: number) => ({
    width,
    height: 300,
    scales: { x: { time: false }, y: { auto: true } },
    axes: [
      { label: "Round", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500], values: (_u, ticks) => ticks.map((t) => String(t)) },
      { label: "Value" },
    ],
    legend: { show: false },
    hooks: {
      ready: [onReady],
      setCursor: [(u) => onCursor(u.cursor.idx ?? null)],
    },
    series,
  });
}

async function loadRun(client: ApiClient, id: number, signal: AbortSignal, onUnauthorized: (err: ApiError) => void): Promise<LoadedRun> {
  try {
    const [simulation, rounds] = await Promise.all([client.simulation(id, signal), allRounds(client, id, signal)]);
    return { id, simulation, rounds: [...rounds].sort((a, b) => a.round - b.round), missing: false, error: null };
  } catch (err) {
    if (isUnauthorized(err)) onUnauthorized(err);
    const missing = (err as ApiError).status === 404;
    return { id, simulation: null, rounds: [], missing, error: missing ? null : errorMessage(err) };
  }
}

function outcomeOf(run: LoadedRun): RunOutcome {
  if (run.simulation !== null) return { id: run.id, state: "loaded" };
  if (run.missing) return { id: run.id, state: "missing" };
  return { id: run.id, state: "failed", reason: run.error ?? "no answer" };
}

/** Runs side by side (`/compare?ids=1,2,3`): every run asked for (up to a sweep's 256), their
 * curves on one chart, segment means, and how their configs differ; what is left out is said. */
export function ComparePage({ client, onUnauthorized }: ComparePageProps) {
  const idsParam = useSearchParam("ids");
  const selection = useMemo(() => readCompareIds(idsParam), [idsParam]);
  const ids = selection.ids;
  const idsKey = ids.join(",");
  const [runs, setRuns] = useState<Map<number, LoadedRun>>(new Map());
  const [retrying, setRetrying] = useState(false);
  const [showAll, setShowAll] = useState(false);
  const controller = useRef<AbortController | null>(null);

  useEffect(() => {
    document.title = `Compare ${idsKey ? `runs ${idsKey.length > 60 ? `${idsKey.slice(0, 60)}…` : idsKey}` : "runs"} · populace`;
  }, [idsKey]);

  /** Loads `wanted`, a few at a time, each into `runs` as it arrives (the count shows progress). */
  const load = useCallback(
    async (wanted: readonly number[]) => {
      const mine = new AbortController();
      controller.current = mine;
      await mapLimit(wanted, LOAD_CONCURRENCY, async (id) => {
        const run = await loadRun(client, id, mine.signal, onUnauthorized);
        if (!mine.signal.aborted) setRuns((current) => new Map(current).set(id, run));
      });
    },
    [client, onUnauthorized],
  );

  useEffect(() => {
    setRuns(new Map());
    void load(idsKey ? idsKey.split(",").map(Number) : []);
    return () => controller.current?.abort();
  }, [idsKey, load]);

  async function retryFailed() {
    setRetrying(true);
    const failed = [...runs.values()].filter((r) => r.simulation === null && !r.missing).map((r) => r.id);
    await load(failed);
    setRetrying(false);
  }

  const loading = runs.size < ids.length;
  // Shown once all have arrived, in the order asked for (a chart made once, not per run).
  const shown = useMemo(() => {
    if (loading) return [];
    return ids.map((id) => runs.get(id)).filter((r): r is ComparedRun => r !== undefined && r.simulation !== null);
  }, [ids, runs, loading]);
  const outcomes = useMemo(() => ids.flatMap((id) => runs.get(id) ?? []).map(outcomeOf), [ids, runs]);
  const notice = loading ? null : compareNotice(selection, outcomes);
  const failedCount = outcomes.filter((o) => o.state === "failed").length;
  const populationIds = useMemo(() => shown.map((r) => r.simulation.population_id), [shown]);
  const populations = usePopulations(client, populationIds, onUnauthorized);
  const diff = useMemo(() => configDiff(shown.map((r) => r.simulation.config)), [shown]);
  const differing = diff.filter((row) => row.differs);
  const rows = showAll ? diff : differing;
  const segments = useMemo(() => segmentComparison(shown.map((r) => r.rounds[r.rounds.length - 1])), [shown]);

  return (
    <main className="page">
      <p className="breadcrumb">
        <Link href="/simulations">Simulations</Link> /
      </p>
      <div className="page-title">
        <h1>Compare runs</h1>
      </div>
      {ids.length < 2 && selection.beyondLimit.length === 0 && (
        <p className="empty">
          Pick two or more runs to compare: tick them on <Link href="/simulations">the simulations list</Link> and choose Compare selected.
        </p>
      )}
      {loading && ids.length > 0 && (
        <Skeleton label={`Loading ${ids.length} runs… (${runs.size} of ${ids.length})`} lines={Math.min(ids.length + 1, 8)} />
      )}
      {notice !== null && (
        <div className="warning compare-notice" role="status" aria-label="Left out of the comparison">
          {notice}
          {failedCount > 0 && (
            <button type="button" className="button plain small" disabled={retrying} onClick={() => void retryFailed()}>
              {retrying ? "Retrying…" : "Retry"}
            </button>
          )}
        </div>
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

          <CompareChart key={shown.map((r) => r.id).join(",")} runs={shown} />

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

/** Under the chart: the runs' keys, or at a hovered (or stepped-to) round each run's values there. */
function CompareReadout({ readout, runs }: { readout: { round: number; runs: ReadoutRun[] } | null; runs: ReadonlyArray<ComparedRun> }) {
  return (
    <output className="compare-readout" aria-live="polite" data-testid="compare-readout">
      {readout === null ? (
        <ul className="compare-keys" aria-label="Runs on the chart">
          {runs.map((r, i) => (
            <li key={r.id}>
              <span className="run-swatch" style={{ background: runColor(i) }} aria-hidden="true" /> #{r.id} {r.simulation.name}
            </li>
          ))}
        </ul>
      ) : (
        <>
          <strong>Round {readout.round}</strong>
          {readout.runs.length === 0 && <span className="muted"> no run has a value here</span>}
          <ul className="compare-keys">
            {readout.runs.map((r) => (
              <li key={r.id} data-run={r.id}>
                <span className="run-swatch" style={{ background: r.color }} aria-hidden="true" /> #{r.id}: {r.values.map((v) => `${v.label} ${formatNumber(v.value)}`).join(", ")}
              </li>
            ))}
          </ul>
        </>
      )}
    </output>
  );
}

/** The runs' curves on one chart, with curve toggles and a readout that follows the pointer or the arrow keys. */
function CompareChart({ runs: shown }: { runs: readonly ComparedRun[] }) {
  const available = useMemo(() => compareCurves(shown.map((r) => r.simulation.metrics)), [shown]);
  // The metrics drawn live in the URL (?metrics=mean,target), so a link shows the same chart.
  const metricsParam = useSearchParam("metrics");
  const chosen = useMemo(() => chosenCurves(available, metricsParam, shown.length), [available, metricsParam, shown.length]);
  const curves = useMemo(() => available.filter((c) => chosen.includes(c.name)), [available, chosen]);
  const [cursor, setCursor] = useState<number | null>(null);
  const plot = useRef<uPlot | null>(null);
  const overlay = useMemo(() => overlaySeries(shown.map((r) => r.rounds), curves.map((c) => c.name)), [shown, curves]);
  const data = useMemo(() => [overlay.x, ...overlay.series] as unknown as uPlot.AlignedData, [overlay]);
  const options = useMemo(() => chartOptions(shown, curves, setCursor, (u) => (plot.current = u)), [shown, curves]);
  const chartLabel = `${curves.map((c) => c.title).join(", ")} over rounds of ${shown.length} runs: ${shown
    .map((r) => `simulation ${r.id} (${r.rounds.length} rounds)`)
    .join(", ")}`;
  const readout = readoutAt(overlay, shown.map((r) => ({ id: r.id, name: r.simulation.name })), curves, cursor);

  function toggleCurve(name: string, on: boolean) {
    const next = available.map((c) => c.name).filter((n) => (n === name ? on : chosen.includes(n)));
    if (next.length > 0) setSearchParams({ metrics: next.join(",") });
  }

  /** Arrow keys step through the rounds; the chart's cursor follows (Escape hides it). */
  function onChartKey(event: KeyboardEvent<HTMLDivElement>) {
    const u = plot.current;
    if (event.key === "Escape") {
      setCursor(null);
      u?.setCursor({ left: -10, top: -10 });
      return;
    }
    const next = stepIndex(overlay.x.length, cursor, event.key);
    if (next === undefined || next === null) return;
    event.preventDefault();
    setCursor(next);
    const x = overlay.x[next];
    if (u && x !== undefined) u.setCursor({ left: u.valToPos(x, "x"), top: u.bbox.height / (2 * (window.devicePixelRatio || 1)) });
  }

  return (
    <section aria-labelledby="compare-chart-heading">
      <div className="section-title">
        <h2 id="compare-chart-heading">Metrics over rounds</h2>
      </div>
      <fieldset className="compare-curves">
        <legend>Metrics drawn</legend>
        {available.map((c) => (
          <label key={c.name} className="checkbox small">
            <input type="checkbox" checked={chosen.includes(c.name)} onChange={(e) => toggleCurve(c.name, e.target.checked)} /> {c.title}
          </label>
        ))}
      </fieldset>
      <p className="muted">
        One colour per run; per metric a line: {curves.map((c, i) => `${c.title.toLowerCase()} ${STYLE_NAMES[i % STYLE_NAMES.length]}`).join(", ")}. Hover the chart, or focus it and use the arrow keys, to read a round.
      </p>
      {/* Focusable, so the values can be read without a pointer: arrows step, Escape leaves. */}
      <div className="compare-chart" role="group" tabIndex={0} aria-label="Compared runs over rounds: use the arrow keys to read each round" onKeyDown={onChartKey} onBlur={() => setCursor(null)}>
        <UPlotChart key={curves.map((c) => c.name).join(",")} options={options} data={data} label={chartLabel} testId="compare-chart" />
      </div>
      <CompareReadout readout={readout} runs={shown} />
    </section>
  );
}
