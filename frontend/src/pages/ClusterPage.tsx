import { useCallback, useEffect, useMemo, useReducer, useRef, useState } from "react";
import { type ApiClient, type ApiError, errorMessage, isUnauthorized } from "../api/client";
import type { EventMessage, Worker } from "../api/types";
import { ConfirmDialog } from "../components/ConfirmDialog";
import { ClusterHistoryPanel } from "../components/charts/ClusterHistoryPanel";
import { ConnectionIndicator } from "../components/ConnectionIndicator";
import { ErrorAlert } from "../components/ErrorAlert";
import { Skeleton } from "../components/Skeleton";
import { type WorkerAction, WorkerTable } from "../components/WorkerTable";
import { useEventStream } from "../hooks/useEventStream";
import { useCanWrite } from "../role";
import { isUnreachable } from "../state/panel";
import { setSearchParams, useSearchParam } from "../router";
import { WORKERS_PER_PAGE, clusterTotals, describeCleanup, fleetCadence, initialWorkersState, pageOf, sortedWorkers, workersReducer } from "../state/workers";

interface ClusterPageProps {
  client: ApiClient;
  token: string;
  onUnauthorized: (err: ApiError) => void;
}

const TOPICS = ["cluster"];

const CONFIRM: Record<WorkerAction, { title: (w: Worker) => string; body: (w: Worker) => string; button: string }> = {
  drain: {
    title: (w) => `Drain worker ${w.id}?`,
    body: (w) => `Worker ${w.id} (${w.address}) keeps its ${w.agents.toLocaleString("en-US")} agents but takes no new ones.`,
    button: "Drain",
  },
  undrain: {
    title: (w) => `Undrain worker ${w.id}?`,
    body: (w) => `Worker ${w.id} (${w.address}) takes new agents again; a degraded population may be repaired onto it.`,
    button: "Undrain",
  },
  removeAgents: {
    title: (w) => `Remove the agents of worker ${w.id}?`,
    body: (w) =>
      `The ${w.agents.toLocaleString("en-US")} agents on worker ${w.id} (${w.address}) move to other online workers and are taken off it. ` +
      "Agents no worker has room for stay in the store, and their population is degraded until a repair finds room.",
    button: "Remove agents",
  },
  remove: {
    title: (w) => `Remove worker ${w.id}?`,
    body: (w) =>
      `Worker ${w.id} (${w.address}) shuts down at its next heartbeat and is never used again. ` +
      "Its agents are re-placed on the online workers with room; a population is degraded while some find none.",
    button: "Remove worker",
  },
};

export function ClusterPage({ client, token, onUnauthorized }: ClusterPageProps) {
  const [state, dispatch] = useReducer(workersReducer, initialWorkersState);
  const [error, setError] = useState<string | null>(null);
  const [unreachable, setUnreachable] = useState(false);
  const [retrying, setRetrying] = useState(false);
  const [pending, setPending] = useState<{ worker: Worker; action: WorkerAction } | null>(null);
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<{ ok: boolean; text: string } | null>(null);
  const fetchSeq = useRef(0);
  const controller = useRef<AbortController | null>(null);
  const canWrite = useCanWrite();

  useEffect(() => {
    document.title = "Cluster · populace";
    return () => controller.current?.abort();
  }, []);

  // Called once the socket is open (or could not open), so no update can slip between list and stream.
  const refetch = useCallback(async () => {
    controller.current?.abort();
    const mine = new AbortController();
    controller.current = mine;
    const id = ++fetchSeq.current;
    dispatch({ type: "fetchStarted", id });
    try {
      const { workers, truncated } = await client.allWorkers({ signal: mine.signal });
      if (mine.signal.aborted) return true;
      dispatch({ type: "fetchDone", id, workers, truncated });
      setError(null);
      setUnreachable(false);
      return true;
    } catch (err) {
      if (mine.signal.aborted) return true;
      dispatch({ type: "fetchFailed", id });
      if (isUnauthorized(err)) onUnauthorized(err);
      else {
        setError(`Could not load workers: ${errorMessage(err)}`);
        setUnreachable(isUnreachable(err));
      }
      return false;
    }
  }, [client, onUnauthorized]);

  // The landing page: show the workers without waiting for the websocket handshake.
  useEffect(() => {
    const mine = new AbortController();
    client.allWorkers({ signal: mine.signal }).then(
      ({ workers, truncated }) => dispatch({ type: "preview", workers, truncated }),
      () => undefined, // the list fetched once the socket is open reports errors
    );
    return () => mine.abort();
  }, [client]);

  const status = useEventStream(
    client,
    token,
    TOPICS,
    {
      onEvents: (events: EventMessage[]) => dispatch({ type: "events", events }),
      onResync: refetch,
    },
    onUnauthorized,
  );

  const workers = useMemo(() => sortedWorkers(state.byId), [state.byId]);
  // A fleet of 1,000 processes is paged: the browser lays out 100 rows, not 1,000.
  // The page is in the URL (?page=2, from 1), so a reload or a shared link shows the same rows.
  const pageParam = Number(useSearchParam("page") ?? "1");
  const firstRow = Number.isInteger(pageParam) && pageParam > 1 ? (pageParam - 1) * WORKERS_PER_PAGE : 0;
  const setFirstRow = (row: number) => setSearchParams({ page: row > 0 ? String(Math.floor(row / WORKERS_PER_PAGE) + 1) : null });
  const pages = pageOf(workers.length, firstRow);
  const shown = useMemo(() => workers.slice(pages.start, pages.end), [workers, pages.start, pages.end]);
  const totals = useMemo(() => clusterTotals(workers), [workers]);
  const cadence = useMemo(() => fleetCadence(workers), [workers]);
  const onAction = useCallback((worker: Worker, action: WorkerAction) => {
    setOutcome(null);
    setPending({ worker, action });
  }, []);

  async function confirm() {
    if (!pending) return;
    const { worker, action } = pending;
    setBusy(true);
    try {
      if (action === "drain") {
        await client.drainWorker(worker.id);
        setOutcome({ ok: true, text: `Worker ${worker.id} is draining: it takes no new agents.` });
      } else if (action === "undrain") {
        await client.undrainWorker(worker.id);
        setOutcome({ ok: true, text: `Worker ${worker.id} is online again: it takes new agents.` });
      } else if (action === "remove") {
        await client.removeWorker(worker.id);
        setOutcome({ ok: true, text: `Worker ${worker.id} was removed.` });
      } else {
        setOutcome({ ok: true, text: describeCleanup(await client.removeWorkerAgents(worker.id)) });
      }
    } catch (err) {
      if (isUnauthorized(err)) onUnauthorized(err);
      setOutcome({ ok: false, text: `Could not ${CONFIRM[action].button.toLowerCase()} worker ${worker.id}: ${errorMessage(err)}` });
    } finally {
      setBusy(false);
      setPending(null);
    }
  }

  return (
    <main className="page">
      <div className="page-title">
        <h1>Cluster</h1>
        <ConnectionIndicator status={status} unreachable={unreachable} />
      </div>

      {/* No "0 of 0" before the list has come: the totals wait for it. */}
      {!state.loaded && error === null && <Skeleton label="Loading the cluster's totals…" lines={1} />}
      {state.loaded && (
        <dl className="stats">
          <div className="stat" data-testid="workers-online">
            <dt>Workers online</dt>
            <dd>
              {totals.online} <span className="muted">of {totals.workers}</span>
            </dd>
          </div>
          <div className="stat" data-testid="agents-hosted">
            <dt>Agents hosted</dt>
            <dd>{totals.agents.toLocaleString("en-US")}</dd>
          </div>
          <div className="stat" data-testid="capacity">
            <dt>Capacity</dt>
            <dd>
              {totals.capacity.toLocaleString("en-US")}{" "}
              <span className="muted">
                {totals.capacity > 0 ? `${((totals.agents / totals.capacity) * 100).toFixed(1)} % used` : "agents"}
              </span>
            </dd>
          </div>
        </dl>
      )}

      <ErrorAlert
        message={error}
        retrying={retrying}
        onRetry={() => {
          setRetrying(true);
          void refetch().finally(() => setRetrying(false));
        }}
      />
      {outcome !== null &&
        (outcome.ok ? (
          <p className="notice" role="status" aria-label="Result">
            {outcome.text}
          </p>
        ) : (
          <p className="alert" role="alert">
            {outcome.text}
          </p>
        ))}

      <ClusterHistoryPanel client={client} onUnauthorized={onUnauthorized} />

      <section aria-labelledby="workers-heading">
        <div className="section-title">
          <h2 id="workers-heading">Workers</h2>
          {state.truncated && <span className="muted">showing first {workers.length} workers</span>}
        </div>
        <WorkerTable workers={shown} cadence={cadence} labelledBy="workers-heading" onAction={canWrite ? onAction : undefined} />
        {workers.length > WORKERS_PER_PAGE && (
          <nav className="pager" aria-label="Worker pages">
            <button type="button" className="button plain" disabled={pages.start === 0} onClick={() => setFirstRow(pages.start - WORKERS_PER_PAGE)}>
              Previous page
            </button>
            <span className="muted" data-testid="worker-rows">
              {(pages.start + 1).toLocaleString("en-US")}–{pages.end.toLocaleString("en-US")} of {workers.length.toLocaleString("en-US")}
            </span>
            <button type="button" className="button plain" disabled={pages.end >= workers.length} onClick={() => setFirstRow(pages.end)}>
              Next page
            </button>
          </nav>
        )}
        {state.loaded && workers.length === 0 && (
          <p className="empty">
            No workers registered yet. Start one with <code>populace worker --manager URL --join-token TOKEN</code>.
          </p>
        )}
        {!state.loaded && error === null && <Skeleton label="Loading workers…" lines={4} />}
      </section>

      <ConfirmDialog
        open={pending !== null}
        title={pending ? CONFIRM[pending.action].title(pending.worker) : ""}
        confirmLabel={pending ? CONFIRM[pending.action].button : ""}
        danger={pending?.action !== "drain" && pending?.action !== "undrain"}
        busy={busy}
        onConfirm={() => void confirm()}
        onCancel={() => setPending(null)}
      >
        <p>{pending ? CONFIRM[pending.action].body(pending.worker) : ""}</p>
      </ConfirmDialog>
    </main>
  );
}
