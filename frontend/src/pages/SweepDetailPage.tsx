import { useEffect, useMemo, useReducer, useState } from "react";
import { type ApiClient, type ApiError, errorMessage, isUnauthorized } from "../api/client";
import { ConfirmDialog } from "../components/ConfirmDialog";
import { SweepParamPlots } from "../components/charts/SweepParamPlots";
import { ConnectionIndicator } from "../components/ConnectionIndicator";
import { ErrorAlert } from "../components/ErrorAlert";
import { Link } from "../components/Link";
import { PopulationList, PopulationName, usePopulations } from "../components/PopulationName";
import { SkeletonRows } from "../components/Skeleton";
import { StateBadge } from "../components/StateBadge";
import { Clip, TableScroll } from "../components/TableScroll";
import { useEventStream } from "../hooks/useEventStream";
import { useRefetch } from "../hooks/useFetched";
import { isUnreachable } from "../state/panel";
import { useCanWrite } from "../role";
import { navigate } from "../router";
import { formatNumber } from "../state/simulations";
import {
  cancelSweep,
  compareHref,
  deleteSweep,
  fetchSweep,
  initialSweepView,
  paramsText,
  progressText,
  sweepViewReducer,
  tokensOf,
} from "../state/sweeps";

interface SweepDetailPageProps {
  client: ApiClient;
  token: string;
  id: number;
  onUnauthorized: (err: ApiError) => void;
}

export function SweepDetailPage({ client, token, id, onUnauthorized }: SweepDetailPageProps) {
  const [view, dispatch] = useReducer(sweepViewReducer, initialSweepView);
  const [confirming, setConfirming] = useState<"cancel" | "delete" | null>(null);
  const [busy, setBusy] = useState(false);
  // Loads of the results so far: the outcome plots read the runs' final metrics again after each.
  const [loads, setLoads] = useState(0);
  const [retrying, setRetrying] = useState(false);
  const [unreachable, setUnreachable] = useState(false);
  const canWrite = useCanWrite();
  const topics = useMemo(() => [`sweep:${id}`], [id]);

  useEffect(() => {
    document.title = `Sweep ${id} · populace`;
  }, [id]);

  const { refetch, error, setError } = useRefetch(
    (signal) =>
      fetchSweep(client, id, signal).then(
        (detail) => {
          setUnreachable(false);
          return detail;
        },
        (err: unknown) => {
          // An aborted load (a newer one took over) says nothing about the manager.
          if (!signal.aborted) setUnreachable(isUnreachable(err));
          throw err;
        },
      ),
    (detail) => {
      dispatch({ type: "loaded", detail });
      setLoads((n) => n + 1);
    },
    [client, id],
    { failure: `Could not load sweep ${id}`, onUnauthorized },
  );

  const status = useEventStream(
    client,
    token,
    topics,
    { onEvents: (events) => dispatch({ type: "events", events }), onResync: refetch },
    onUnauthorized,
  );

  useEffect(() => {
    if (view.stale) void refetch();
  }, [view.stale, refetch]);

  async function retry() {
    setRetrying(true);
    await refetch();
    setRetrying(false);
  }

  async function act(kind: "cancel" | "delete") {
    setBusy(true);
    try {
      if (kind === "cancel") {
        await cancelSweep(client, id);
        await refetch();
      } else {
        await deleteSweep(client, id);
        navigate("/sweeps");
      }
    } catch (err) {
      if (isUnauthorized(err)) return onUnauthorized(err);
      setError(`Could not ${kind} sweep ${id}: ${errorMessage(err)}`);
    } finally {
      setBusy(false);
      setConfirming(null);
    }
  }

  const detail = view.detail;
  const rows = detail?.results.items ?? [];
  const compare = compareHref(rows);
  const populationIds = useMemo(
    () => [...(detail?.populations ?? []), ...rows.flatMap((r) => (r.population_id === null ? [] : [r.population_id]))],
    [detail?.populations, rows],
  );
  const populations = usePopulations(client, populationIds, onUnauthorized);

  return (
    <main className="page">
      <p className="breadcrumb">
        <Link href="/sweeps">Sweeps</Link> / {id}
      </p>
      <div className="page-title">
        <h1>{detail ? detail.name : `Sweep ${id}`}</h1>
        {detail && <StateBadge state={detail.status} />}
        <ConnectionIndicator status={status} unreachable={unreachable} />
        {canWrite && detail && (
          <div className="push-right form-actions inline-actions">
            {detail.status === "running" ? (
              <button type="button" className="button danger" onClick={() => setConfirming("cancel")}>
                Cancel sweep
              </button>
            ) : (
              <button type="button" className="button danger" onClick={() => setConfirming("delete")}>
                Delete sweep
              </button>
            )}
          </div>
        )}
      </div>

      {view.deleted && <p className="alert">This sweep was deleted.</p>}
      {/* Retry loads the sweep again (a failed cancel or delete is retried from its button). */}
      <ErrorAlert message={error} onRetry={() => void retry()} retrying={retrying} />
      {detail?.error && (
        <p className="alert" role="status" aria-label="Sweep error">
          {detail.error}
        </p>
      )}

      {detail && (
        <section className="card" aria-labelledby="sweep-grid-heading">
          <h2 id="sweep-grid-heading">Grid</h2>
          <p>
            <span aria-label="Sweep progress">{progressText(detail)}</span> · {detail.mode} · {detail.runs} point{detail.runs === 1 ? "" : "s"}
          </p>
          {detail.populations && detail.populations.length > 0 && (
            <p aria-label="Sweep populations">
              On <PopulationList ids={detail.populations} populations={populations} />
            </p>
          )}
          <ul>
            {Object.entries(detail.grid).map(([key, values]) => (
              <li key={key}>
                <code>{key}</code>: {values.map((v) => (typeof v === "string" ? v : JSON.stringify(v))).join(" · ")}
              </li>
            ))}
          </ul>
        </section>
      )}

      {detail && loads > 0 && <SweepParamPlots client={client} detail={detail} version={loads} onUnauthorized={onUnauthorized} />}

      <section aria-labelledby="sweep-results-heading">
        <div className="section-title">
          <h2 id="sweep-results-heading">Results</h2>
          {compare && (
            <Link href={compare} className="button plain push-right">
              Compare runs
            </Link>
          )}
        </div>
        <TableScroll label="Results" pinFirst>
          <table className="data" aria-labelledby="sweep-results-heading">
            <thead>
              <tr>
                <th scope="col">Point</th>
                <th scope="col">Params</th>
                <th scope="col">Run</th>
                <th scope="col">Population</th>
                <th scope="col">Status</th>
                <th scope="col">Rounds</th>
                <th scope="col">Final mean</th>
                <th scope="col">Target</th>
                <th scope="col">Winner</th>
                <th scope="col">Valid</th>
                <th scope="col">Tokens</th>
              </tr>
            </thead>
            <tbody aria-busy={!detail}>
              {!detail && error === null && <SkeletonRows columns={11} rows={4} />}
              {rows.map((r) => (
                <tr key={r.point} aria-label={`Point ${r.point}`}>
                  <td className="num">{r.point}</td>
                  <td>
                    <Clip text={paramsText(r.params)}>
                      <code>{paramsText(r.params)}</code>
                    </Clip>
                  </td>
                  <td className="num">{r.simulation_id === null ? "–" : <Link href={`/simulations/${r.simulation_id}`}>{r.simulation_id}</Link>}</td>
                  <td>{r.population_id === null ? "–" : <PopulationName id={r.population_id} population={populations.get(r.population_id)} />}</td>
                  <td>{r.status === null ? <span className="muted">waiting</span> : <StateBadge state={r.status} />}</td>
                  <td className="num">{r.rounds === null ? "–" : `${r.rounds_played ?? 0}/${r.rounds}`}</td>
                  <td className="num" data-column="final-mean">
                    {formatNumber(r.final_mean)}
                  </td>
                  <td className="num">{formatNumber(r.target)}</td>
                  <td className="num">{formatNumber(r.winner_value)}</td>
                  <td className="num">{formatNumber(r.n_valid)}</td>
                  <td className="num">{formatNumber(tokensOf(r))}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableScroll>
        {!detail && error === null && (
          <p className="visually-hidden" role="status">
            Loading sweep…
          </p>
        )}
      </section>

      <ConfirmDialog
        open={confirming === "cancel"}
        title={`Cancel sweep ${id}?`}
        confirmLabel="Cancel sweep"
        cancelLabel="Keep running"
        danger
        busy={busy}
        onConfirm={() => void act("cancel")}
        onCancel={() => setConfirming(null)}
      >
        <p>No more runs start, and the runs in flight are cancelled. Finished runs keep their results.</p>
      </ConfirmDialog>
      <ConfirmDialog
        open={confirming === "delete"}
        title={`Delete sweep ${id}?`}
        confirmLabel="Delete sweep"
        cancelLabel="Keep it"
        danger
        busy={busy}
        onConfirm={() => void act("delete")}
        onCancel={() => setConfirming(null)}
      >
        <p>Every run of the sweep is deleted with its rounds and decisions.</p>
      </ConfirmDialog>
    </main>
  );
}
