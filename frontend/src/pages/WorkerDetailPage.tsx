import { useCallback, useEffect, useRef, useState } from "react";
import { type ApiClient, ApiError, errorMessage, isUnauthorized } from "../api/client";
import { answer } from "../api/typedApi";
import { LOG_LEVELS, type LogLevel, type Worker, type WorkerHistory } from "../api/types";
import { HistoryCharts } from "../components/charts/HistoryCharts";
import { ErrorAlert } from "../components/ErrorAlert";
import { Link } from "../components/Link";
import { Skeleton } from "../components/Skeleton";
import { RelativeTime } from "../components/RelativeTime";
import { StateBadge } from "../components/StateBadge";
import { parseServerTime } from "../format";
import { historyPollMs, usePolling } from "../hooks/usePolling";
import { type LogFollow, applyLogRead, initialLogFollow } from "../state/history";

interface WorkerDetailPageProps {
  client: ApiClient;
  id: number;
  onUnauthorized: (err: ApiError) => void;
}

// A followed log is read this often, the lines after the last one seen.
const LOG_POLL_MS = 3000;
const FIRST_LOG_READ = 500;
const FOLLOW_LOG_READ = 2000;

export function WorkerDetailPage({ client, id, onUnauthorized }: WorkerDetailPageProps) {
  const [worker, setWorker] = useState<Worker | null>(null);
  const [history, setHistory] = useState<WorkerHistory | null>(null);
  const [error, setError] = useState<{ status?: number; text: string } | null>(null);
  // Bumped by Retry: a new tick, so the polling reads again at once.
  const [retries, setRetries] = useState(0);

  useEffect(() => {
    document.title = `Worker ${id} · populace`;
  }, [id]);

  const refresh = useCallback(
    async (signal: AbortSignal) => {
      try {
        const [w, h] = await Promise.all([
          answer(client.api.GET("/api/workers/{worker_id}", { params: { path: { worker_id: id } }, signal })) as Promise<Worker>,
          answer(client.api.GET("/api/workers/{worker_id}/history", { params: { path: { worker_id: id } }, signal })),
        ]);
        if (signal.aborted) return;
        setWorker(w);
        setHistory(h);
        setError(null);
      } catch (err) {
        if (signal.aborted) return;
        if (isUnauthorized(err)) onUnauthorized(err);
        else setError({ status: err instanceof ApiError ? err.status : undefined, text: errorMessage(err) });
      }
    },
    [client, id, onUnauthorized, retries],
  );
  usePolling(refresh, historyPollMs(history?.bucket_s), error?.status !== 404);

  if (error?.status === 404) {
    return (
      <main className="page">
        <h1>Worker {id}</h1>
        <p className="alert" role="alert">
          Worker {id} does not exist.
        </p>
      </main>
    );
  }

  return (
    <main className="page">
      <p className="breadcrumb">
        <Link href="/cluster">Cluster</Link> /
      </p>
      <div className="page-title">
        <h1>Worker {id}</h1>
        {worker && <StateBadge state={worker.state} />}
      </div>
      <ErrorAlert message={error ? `Could not load worker ${id}: ${error.text}` : null} onRetry={() => setRetries((n) => n + 1)} />
      {!worker && !error && <Skeleton label="Loading worker…" lines={5} />}
      {worker && <WorkerFacts worker={worker} />}

      <section aria-labelledby="history-heading">
        <div className="section-title">
          <h2 id="history-heading">Load over time</h2>
          {history && <span className="muted">one point per {history.bucket_s} s, kept for {Math.round(history.window_s / 60)} min by the manager</span>}
        </div>
        {!history && !error && <Skeleton label="Loading the worker's history…" lines={2} />}
        {history && <HistoryCharts points={history.points} bucketS={history.bucket_s} prefix="worker-history" />}
      </section>

      <WorkerLogPanel client={client} id={id} live={worker !== null && (worker.state === "online" || worker.state === "draining")} onUnauthorized={onUnauthorized} />
    </main>
  );
}

function WorkerFacts({ worker }: { worker: Worker }) {
  const labels = Object.entries(worker.labels ?? {});
  return (
    <section aria-labelledby="facts-heading">
      <h2 id="facts-heading">Process</h2>
      <dl className="facts" data-testid="worker-facts">
        <dt>State</dt>
        <dd>{worker.state}</dd>
        <dt>Address</dt>
        <dd className="mono">{worker.address}</dd>
        <dt>Node / slot</dt>
        <dd>
          {worker.node}
          {worker.slot !== null && worker.slot !== undefined && ` / ${worker.slot}`}
        </dd>
        <dt>Labels</dt>
        <dd>{labels.length > 0 ? labels.map(([name, value]) => `${name}=${value}`).join(", ") : <span className="muted">none</span>}</dd>
        <dt>Agents / capacity</dt>
        <dd>
          {worker.agents.toLocaleString("en-US")} / {worker.capacity.toLocaleString("en-US")}
        </dd>
        <dt>Version</dt>
        <dd>{worker.version}</dd>
        <dt>TLS</dt>
        <dd>{worker.tls ? "yes (gRPC over TLS)" : "no"}</dd>
        <dt>PID</dt>
        <dd>{worker.pid}</dd>
        <dt>Last heartbeat</dt>
        <dd>
          <RelativeTime iso={worker.last_heartbeat} />
        </dd>
      </dl>
    </section>
  );
}

function clockTime(iso: string): string {
  const ms = parseServerTime(iso);
  return Number.isNaN(ms) ? iso : new Date(ms).toLocaleTimeString("en-GB", { hour12: false });
}

interface WorkerLogPanelProps {
  client: ApiClient;
  id: number;
  /** Whether the worker runs (an offline one has no process to ask). */
  live: boolean;
  onUnauthorized: (err: ApiError) => void;
}

/** The worker's last log lines, read from its process through the manager; followed live. */
function WorkerLogPanel({ client, id, live, onUnauthorized }: WorkerLogPanelProps) {
  const [level, setLevel] = useState<LogLevel>("info");
  const [follow, setFollow] = useState(true);
  const [logs, setLogs] = useState<LogFollow>(initialLogFollow);
  const [error, setError] = useState<string | null>(null);
  const [reads, setReads] = useState(0); // bumped by Refresh: starts the follow afresh
  const state = useRef(logs);
  state.current = logs;

  // A new level or a Refresh reads again from the start.
  useEffect(() => {
    state.current = initialLogFollow;
    setLogs(initialLogFollow);
  }, [level, reads]);

  const read = useCallback(
    async (signal: AbortSignal) => {
      const asked = state.current.after;
      try {
        const result = await answer(
          client.api.GET("/api/workers/{worker_id}/logs", {
            params: { path: { worker_id: id }, query: { level, after: asked || undefined, limit: asked ? FOLLOW_LOG_READ : FIRST_LOG_READ } },
            signal,
          }),
        );
        if (signal.aborted) return;
        const next = applyLogRead(state.current, result, asked);
        state.current = next;
        setLogs(next);
        setError(null);
      } catch (err) {
        if (signal.aborted) return;
        if (isUnauthorized(err)) onUnauthorized(err);
        else setError(errorMessage(err));
      }
    },
    // `reads` makes Refresh a new tick, so the polling starts over at once.
    [client, id, level, onUnauthorized, reads],
  );
  usePolling(read, follow ? LOG_POLL_MS : null, live);

  return (
    <section aria-labelledby="logs-heading">
      <div className="section-title">
        <h2 id="logs-heading">Recent log lines</h2>
        <div className="filters">
          <select aria-label="Log level" value={level} onChange={(e) => setLevel(e.target.value as LogLevel)}>
            {LOG_LEVELS.map((name) => (
              <option key={name} value={name}>
                {name} and above
              </option>
            ))}
          </select>
          <label className="checkbox small">
            <input type="checkbox" checked={follow} onChange={(e) => setFollow(e.target.checked)} />
            Follow
          </label>
          <button type="button" className="button plain small" onClick={() => setReads((n) => n + 1)} disabled={!live}>
            Refresh
          </button>
        </div>
      </div>
      {!live && <p className="muted">The worker is not running: its log lines are kept by its process only.</p>}
      {error !== null && (
        <p className="alert" role="alert">
          Could not read the worker's logs: {error}
        </p>
      )}
      {live && logs.lines.length === 0 && error === null && <p className="empty">No log lines at this level yet.</p>}
      {logs.lines.length > 0 && (
        <ol className="log-lines" data-testid="worker-logs" aria-label="Log lines">
          {logs.lines.map((line) => (
            <li key={line.sequence} data-sequence={line.sequence} className={`log-${line.level.toLowerCase()}`}>
              <span className="log-time mono">{clockTime(line.time)}</span> <span className="log-level">{line.level}</span> <span className="log-logger muted">{line.logger}</span>{" "}
              <span className="log-message">{line.message}</span>
            </li>
          ))}
        </ol>
      )}
    </section>
  );
}
