import { useEffect, useMemo, useReducer, useState } from "react";
import { type ApiClient, type ApiError, errorMessage, isUnauthorized } from "../api/client";
import { type ConnectionStatus, EventStream, eventsUrl } from "../api/events";
import type { EventMessage } from "../api/types";
import { ConnectionIndicator } from "../components/ConnectionIndicator";
import { WorkerTable } from "../components/WorkerTable";
import { clusterTotals, initialWorkersState, sortedWorkers, workersReducer } from "../state/workers";

interface ClusterPageProps {
  client: ApiClient;
  token: string;
  onUnauthorized: (err: ApiError) => void;
}

// Events are applied in small batches: a large cluster heartbeats many times a second.
const FLUSH_MS = 100;

export function ClusterPage({ client, token, onUnauthorized }: ClusterPageProps) {
  const [state, dispatch] = useReducer(workersReducer, initialWorkersState);
  const [status, setStatus] = useState<ConnectionStatus>("connecting");
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    document.title = "Cluster · populace";
  }, []);

  useEffect(() => {
    let disposed = false;
    const queue: EventMessage[] = [];
    let flushTimer: ReturnType<typeof setTimeout> | null = null;
    let fetchSeq = 0;
    let controller: AbortController | null = null;

    const flush = () => {
      if (flushTimer !== null) {
        clearTimeout(flushTimer);
        flushTimer = null;
      }
      if (queue.length > 0) dispatch({ type: "events", events: queue.splice(0) });
    };

    const handleError = (err: unknown, what: string) => {
      if (isUnauthorized(err)) onUnauthorized(err);
      else setError(`${what}: ${errorMessage(err)}`);
    };

    // Called once the socket is open, so no update can slip between list and stream.
    const refetch = async () => {
      flush();
      controller?.abort();
      const mine = new AbortController();
      controller = mine;
      const id = ++fetchSeq;
      dispatch({ type: "fetchStarted", id });
      try {
        const { workers, truncated } = await client.allWorkers({ signal: mine.signal });
        if (disposed || mine.signal.aborted) return;
        flush();
        dispatch({ type: "fetchDone", id, workers, truncated });
        setError(null);
      } catch (err) {
        if (disposed || mine.signal.aborted) return;
        dispatch({ type: "fetchFailed", id });
        handleError(err, "Could not load workers");
      }
    };

    let fetchedOnce = false;
    const stream = new EventStream({
      url: () => eventsUrl(window.location, token, ["cluster"]),
      onEvent: (event) => {
        queue.push(event);
        flushTimer ??= setTimeout(flush, FLUSH_MS);
      },
      onStatus: (next, info) => {
        if (disposed) return;
        setStatus(next);
        if (next === "live") {
          fetchedOnce = true;
          void refetch();
        } else if (next === "reconnecting" && info.closeCode !== undefined) {
          if (!fetchedOnce) {
            // The socket could not open: still show the list (and learn of a bad token from it).
            fetchedOnce = true;
            void refetch();
          } else if (info.closeCode === 1008 || !info.everOpened) {
            // The websocket gives no status code; ask the REST API whether the token still works.
            client.info().catch((err: unknown) => {
              if (!disposed && isUnauthorized(err)) onUnauthorized(err);
            });
          }
        }
      },
    });
    stream.start();

    return () => {
      disposed = true;
      stream.stop();
      controller?.abort();
      if (flushTimer !== null) clearTimeout(flushTimer);
    };
  }, [client, token, onUnauthorized]);

  const workers = useMemo(() => sortedWorkers(state.byId), [state.byId]);
  const totals = useMemo(() => clusterTotals(workers), [workers]);

  return (
    <main className="page">
      <div className="page-title">
        <h1>Cluster</h1>
        <ConnectionIndicator status={status} />
      </div>

      <dl className="stats">
        <div className="stat" data-testid="workers-online">
          <dt>Workers online</dt>
          <dd>
            {totals.online} <span className="muted">of {totals.workers}</span>
          </dd>
        </div>
        <div className="stat" data-testid="agents-hosted">
          <dt>Agents hosted / capacity</dt>
          <dd>
            {totals.agents.toLocaleString()} <span className="muted">/ {totals.capacity.toLocaleString()}</span>
          </dd>
        </div>
      </dl>

      {error !== null && (
        <p className="alert" role="alert">
          {error}
        </p>
      )}

      <section aria-labelledby="workers-heading">
        <div className="section-title">
          <h2 id="workers-heading">Workers</h2>
          {state.truncated && <span className="muted">showing first {workers.length} workers</span>}
        </div>
        <WorkerTable workers={workers} labelledBy="workers-heading" />
        {state.loaded && workers.length === 0 && (
          <p className="empty">
            No workers registered yet. Start one with{" "}
            <code>populace worker --manager URL --join-token TOKEN</code>.
          </p>
        )}
        {!state.loaded && error === null && <p className="empty">Loading workers…</p>}
      </section>
    </main>
  );
}
