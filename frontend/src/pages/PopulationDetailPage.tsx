import { useCallback, useEffect, useMemo, useRef, useState } from "react";
import { type ApiClient, type ApiError, errorMessage, isUnauthorized } from "../api/client";
import { answer } from "../api/typedApi";
import type { EventMessage, Population, PopulationDetail, PopulationProgress } from "../api/types";
import { AgentBrowser } from "../components/AgentBrowser";
import { CategoryBars } from "../components/CategoryBars";
import { ConfirmDialog } from "../components/ConfirmDialog";
import { ConnectionIndicator } from "../components/ConnectionIndicator";
import { ErrorAlert } from "../components/ErrorAlert";
import { GraphPanel } from "../components/GraphPanel";
import { Link } from "../components/Link";
import { ProgressBar } from "../components/ProgressBar";
import { RelativeTime } from "../components/RelativeTime";
import { Skeleton } from "../components/Skeleton";
import { StateBadge } from "../components/StateBadge";
import { useEventStream } from "../hooks/useEventStream";
import { useCanWrite } from "../role";
import { isUnreachable } from "../state/panel";
import {
  cleanupSummary,
  isPlayable,
  isPopulationProgress,
  populationAfter,
  placementRows,
  progressView,
  repairedSummary,
  repairOutcome,
  statusText,
} from "../state/populations";

interface PopulationDetailPageProps {
  client: ApiClient;
  token: string;
  id: number;
  onUnauthorized: (err: ApiError) => void;
}

/** Stages after which the stored population changed: reload it (counts, placement, agents). */
const RELOAD_STAGES = new Set(["deployed", "failed", "deleted", "worker_cleaned", "worker_orphaned", "repaired"]);

export function PopulationDetailPage({ client, token, id, onUnauthorized }: PopulationDetailPageProps) {
  const [population, setPopulation] = useState<PopulationDetail | null>(null);
  const [progress, setProgress] = useState<PopulationProgress | null>(null);
  const [cleanup, setCleanup] = useState<PopulationProgress | null>(null);
  const [error, setError] = useState<string | null>(null);
  // The population's own load, apart from the actions' errors: shown with a Retry.
  const [loadError, setLoadError] = useState<{ text: string; unreachable: boolean } | null>(null);
  const [retrying, setRetrying] = useState(false);
  const [notFound, setNotFound] = useState(false);
  const [confirming, setConfirming] = useState(false);
  const [deleting, setDeleting] = useState(false);
  const [reloadKey, setReloadKey] = useState(0);
  const [repairing, setRepairing] = useState(false);
  // What the last repair left: whole, still degraded (a warning), or refused (an error).
  const [repaired, setRepaired] = useState<{ kind: "notice" | "warning" | "alert"; text: string } | null>(null);
  // The last repair's counts (restored, re-placed, no room), from its `repaired` event.
  const [repairReport, setRepairReport] = useState<PopulationProgress | null>(null);
  const controller = useRef<AbortController | null>(null);
  const topics = useMemo(() => [`population:${id}`], [id]);
  const canWrite = useCanWrite();

  useEffect(() => () => controller.current?.abort(), []);
  useEffect(() => {
    document.title = `${population?.name ?? `Population ${id}`} · populace`;
  }, [population?.name, id]);

  const refetch = useCallback(async () => {
    controller.current?.abort();
    const mine = new AbortController();
    controller.current = mine;
    try {
      const result = await client.population(id, mine.signal);
      if (mine.signal.aborted) return true;
      setPopulation(result);
      setReloadKey((k) => k + 1);
      setLoadError(null);
      return true;
    } catch (err) {
      if (mine.signal.aborted) return true;
      if (isUnauthorized(err)) onUnauthorized(err);
      else if ((err as ApiError).status === 404) setNotFound(true);
      else setLoadError({ text: `Could not load population ${id}: ${errorMessage(err)}`, unreachable: isUnreachable(err) });
      return false;
    }
  }, [client, id, onUnauthorized]);

  const onEvents = useCallback(
    (events: EventMessage[]) => {
      let reload = false;
      for (const event of events) {
        if (!isPopulationProgress(event)) continue;
        const p = event.payload;
        setProgress(p);
        if (p.stage === "deleted") setCleanup(p);
        if (p.stage === "repaired") setRepairReport(p);
        setPopulation((current) => (current ? populationAfter(current, p) : current));
        if (RELOAD_STAGES.has(p.stage)) reload = true;
      }
      if (reload) void refetch();
    },
    [refetch],
  );

  const status = useEventStream(client, token, topics, { onEvents, onResync: refetch }, onUnauthorized);

  async function remove() {
    setDeleting(true);
    try {
      const result = (await answer(client.api.DELETE("/api/populations/{population_id}", { params: { path: { population_id: id } } }))) as Population;
      setPopulation((current) => (current ? { ...current, status: result.status } : current));
      setConfirming(false);
    } catch (err) {
      if (isUnauthorized(err)) onUnauthorized(err);
      setError(`Could not delete population ${id}: ${errorMessage(err)}`);
      setConfirming(false);
    } finally {
      setDeleting(false);
    }
  }

  async function repair() {
    setRepairing(true);
    setRepaired(null);
    setRepairReport(null);
    try {
      const result = await client.repairPopulation(id);
      setPopulation((current) => (current ? { ...current, status: result.status, hosted: result.hosted } : current));
      const outcome = repairOutcome(result);
      setRepaired({ kind: outcome.ok ? "notice" : "warning", text: outcome.text });
      void refetch(); // placement per worker changed
    } catch (err) {
      if (isUnauthorized(err)) onUnauthorized(err);
      setRepaired({ kind: "alert", text: `Could not repair population ${id}: ${errorMessage(err)}` });
    } finally {
      setRepairing(false);
    }
  }

  if (notFound) {
    return (
      <main className="page">
        <h1>Population {id} not found</h1>
        <p>
          It may never have existed. See <Link href="/populations">all populations</Link>.
        </p>
      </main>
    );
  }

  const perWorker = placementRows(population?.agents_per_worker ?? {});
  const stored = perWorker.reduce((sum, w) => sum + w.agents, 0);
  const maxPerWorker = Math.max(1, ...perWorker.map((w) => w.agents));
  const counts = population?.counts ?? {};
  const categories = Object.fromEntries(Object.entries(counts).map(([name, c]) => [name, Object.keys(c)]));
  const workerIds = perWorker.flatMap((w) => (w.worker === null ? [] : [w.worker]));
  const active = population?.status === "deploying" || population?.status === "deleting";
  const view = progress ? progressView(progress) : null;

  return (
    <main className="page">
      <p className="breadcrumb">
        <Link href="/populations">Populations</Link> /
      </p>
      <div className="page-title">
        <h1>{population?.name ?? `Population ${id}`}</h1>
        {population && <StateBadge state={population.status} />}
        <ConnectionIndicator status={status} unreachable={loadError?.unreachable ?? false} />
        {canWrite && population && isPlayable(population.status) && (
          <>
            <button type="button" className="button plain push-right" disabled={repairing} onClick={() => void repair()}>
              {repairing ? "Repairing…" : "Repair"}
            </button>
            <Link className="button plain" href={`/simulations/new?population=${id}`}>
              Launch a simulation
            </Link>
          </>
        )}
        {canWrite && (
          <button
            type="button"
            className={population && isPlayable(population.status) ? "button danger" : "button danger push-right"}
            disabled={!population || population.status === "deploying" || population.status === "deleted" || deleting}
            onClick={() => setConfirming(true)}
          >
            Delete population
          </button>
        )}
      </div>

      <ErrorAlert
        message={loadError?.text ?? null}
        retrying={retrying}
        onRetry={() => {
          setRetrying(true);
          void refetch().finally(() => setRetrying(false));
        }}
      />
      <ErrorAlert message={error} />
      {population?.status === "failed" && (
        <p className="alert" role="alert">
          The deploy failed and was undone: {population.error}
        </p>
      )}
      {population?.status === "degraded" && (
        <div className="warning" role="status" aria-label="Hosting" data-testid="hosting">
          <strong>{statusText(population)}.</strong> {(population.size - population.hosted).toLocaleString("en-US")} agents have no
          live worker: the manager re-places them as soon as an online worker has room (or press Repair). A simulation on it
          pauses at the first round unless launched with partial rounds allowed.
          {population.error && <> {population.error}</>}
        </div>
      )}
      {repaired && (
        <p className={repaired.kind} role="status" aria-label="Repair result">
          {repaired.text}
          {repairReport && ` ${repairedSummary(repairReport)}.`}
        </p>
      )}
      {active && (
        <ProgressBar
          label={population?.status === "deleting" ? "Deletion progress" : "Deploy progress"}
          fraction={view?.fraction ?? null}
          text={view?.label ?? (population?.status === "deleting" ? "Deleting…" : "Starting…")}
        />
      )}
      {cleanup && (
        <p className="notice" role="status" aria-label="Cleanup result">
          {cleanupSummary(cleanup)}. Agents left in the store: {stored.toLocaleString("en-US")}.
        </p>
      )}

      {population && (
        <dl className="stats">
          <div className="stat">
            <dt>Size</dt>
            <dd>{population.size.toLocaleString("en-US")}</dd>
          </div>
          <div className="stat" data-testid="population-hosted">
            <dt>Hosted by live workers</dt>
            <dd>
              {isPlayable(population.status) ? population.hosted.toLocaleString("en-US") : "–"}
              {population.status === "degraded" && <span className="muted small"> of {population.size.toLocaleString("en-US")}</span>}
            </dd>
          </div>
          <div className="stat" data-testid="agents-stored">
            <dt>Agents in the store</dt>
            <dd>{stored.toLocaleString("en-US")}</dd>
          </div>
          {population.dedicated_process && (
            <div className="stat" data-testid="population-dedicated">
              <dt>Placement</dt>
              <dd className="small" title="placement.dedicated_process: each agent alone on a worker process (a core)">
                A process per agent
              </dd>
            </div>
          )}
          <div className="stat">
            <dt>Seed</dt>
            <dd>{population.seed}</dd>
          </div>
          <div className="stat">
            <dt>Created</dt>
            <dd className="small">
              <RelativeTime iso={population.created_at} />
            </dd>
          </div>
        </dl>
      )}

      <div className="columns">
        <section aria-labelledby="distributions-heading">
          <h2 id="distributions-heading">Distributions</h2>
          {!population ? (
            loadError === null && <Skeleton label="Loading the distributions…" />
          ) : Object.keys(counts).length === 0 ? (
            <p className="empty">{population?.status === "deploying" ? "Counted once deployed." : "No counts."}</p>
          ) : (
            Object.entries(counts).map(([name, c]) => <CategoryBars key={name} name={name} counts={c} />)
          )}
        </section>
        <section aria-labelledby="placement-heading">
          <h2 id="placement-heading">Agents per worker</h2>
          {!population ? (
            loadError === null && <Skeleton label="Loading the placement…" />
          ) : perWorker.length === 0 ? (
            <p className="empty">
              No agents on any worker. See the workers on the <Link href="/cluster">Cluster</Link> page.
            </p>
          ) : (
            <table className="bars-table" aria-labelledby="placement-heading">
              <tbody>
                {perWorker.map((w) => (
                  <tr key={w.worker ?? "none"} aria-label={w.worker === null ? "No worker" : `Worker ${w.worker}`}>
                    <th scope="row">{w.worker === null ? "no worker (not hosted)" : `Worker ${w.worker}`}</th>
                    <td className="bar-cell">
                      <span className="bar" style={{ width: `${((w.agents / maxPerWorker) * 100).toFixed(2)}%` }} aria-hidden="true" />
                    </td>
                    <td className="num">{w.agents.toLocaleString("en-US")}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </section>
      </div>

      {/* Populations deployed with `graph:`: its numbers and degree distribution. */}
      {population?.graph && <GraphPanel graph={population.graph} />}

      {population && (
        <AgentBrowser
          key={id}
          client={client}
          populationId={id}
          workerIds={workerIds}
          categories={categories}
          reloadKey={reloadKey}
          deploying={population.status === "deploying"}
          onUnauthorized={onUnauthorized}
        />
      )}

      <ConfirmDialog
        open={confirming}
        title={`Delete ${population?.name ?? `population ${id}`}?`}
        confirmLabel="Delete"
        danger
        busy={deleting}
        onConfirm={() => void remove()}
        onCancel={() => setConfirming(false)}
      >
        <p>
          Its {stored.toLocaleString("en-US")} agents are removed from every worker and from the store.
          This cannot be undone.
        </p>
      </ConfirmDialog>
    </main>
  );
}
