import { useCallback, useState } from "react";
import { type ApiClient, type ApiError, errorMessage, isUnauthorized } from "../../api/client";
import type { ClusterHistory } from "../../api/types";
import { historyPollMs, usePolling } from "../../hooks/usePolling";
import { ErrorAlert } from "../ErrorAlert";
import { Skeleton } from "../Skeleton";
import { HistoryCharts } from "./HistoryCharts";

interface ClusterHistoryPanelProps {
  client: ApiClient;
  onUnauthorized: (err: ApiError) => void;
}

/** The workers' totals over the last hour, read from the manager every bucket or so: each point
 * is the sum of the workers' own points for the same bucket (what their pages chart). */
export function ClusterHistoryPanel({ client, onUnauthorized }: ClusterHistoryPanelProps) {
  const [history, setHistory] = useState<ClusterHistory | null>(null);
  const [error, setError] = useState<string | null>(null);
  // Bumped by Retry: a new tick, so the polling reads again at once.
  const [retries, setRetries] = useState(0);
  const read = useCallback(
    async (signal: AbortSignal) => {
      try {
        const result = await client.clusterHistory(signal);
        if (signal.aborted) return;
        setHistory(result);
        setError(null);
      } catch (err) {
        if (signal.aborted) return;
        if (isUnauthorized(err)) onUnauthorized(err);
        else setError(errorMessage(err));
      }
    },
    [client, onUnauthorized, retries],
  );
  usePolling(read, historyPollMs(history?.bucket_s));

  return (
    <section aria-labelledby="cluster-history-heading">
      <div className="section-title">
        <h2 id="cluster-history-heading">Load over time</h2>
        {history && <span className="muted">the workers' series summed, one point per {history.bucket_s} s</span>}
      </div>
      <ErrorAlert message={error === null ? null : `Could not load the cluster's history: ${error}`} onRetry={() => setRetries((n) => n + 1)} />
      {!history && error === null && <Skeleton label="Loading the cluster's history…" lines={2} />}
      {history && <HistoryCharts points={history.points} bucketS={history.bucket_s} prefix="cluster-history" cpuTitle="CPU (sum of processes)" />}
    </section>
  );
}
