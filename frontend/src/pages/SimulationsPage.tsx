import { useCallback, useEffect, useMemo, useReducer, useRef, useState } from "react";
import { type ApiClient, type ApiError, errorMessage, isUnauthorized } from "../api/client";
import type { Population } from "../api/types";
import { ConnectionIndicator } from "../components/ConnectionIndicator";
import { LaunchSimulationForm } from "../components/LaunchSimulationForm";
import { Link } from "../components/Link";
import { ProgressBar } from "../components/ProgressBar";
import { RelativeTime } from "../components/RelativeTime";
import { StateBadge } from "../components/StateBadge";
import { useEventStream } from "../hooks/useEventStream";
import { useCanWrite } from "../role";
import { navigate } from "../router";
import { isPlayable } from "../state/populations";
import { initialSimulationsState, isActive, simulationsReducer, sortedSimulations } from "../state/simulations";

interface SimulationsPageProps {
  client: ApiClient;
  token: string;
  onUnauthorized: (err: ApiError) => void;
}

const TOPICS = ["simulation:*"];

export function SimulationsPage({ client, token, onUnauthorized }: SimulationsPageProps) {
  const [state, dispatch] = useReducer(simulationsReducer, initialSimulationsState);
  const [truncated, setTruncated] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [launching, setLaunching] = useState(() => new URLSearchParams(window.location.search).has("launch"));
  const [populations, setPopulations] = useState<Population[] | null>(null);
  const controller = useRef<AbortController | null>(null);
  const canWrite = useCanWrite();
  // Batches of events received so far: orders the list against the events (see SimulationAction).
  const received = useRef(0);

  useEffect(() => {
    document.title = "Simulations · populace";
    return () => controller.current?.abort();
  }, []);

  const refetch = useCallback(async () => {
    controller.current?.abort();
    const mine = new AbortController();
    controller.current = mine;
    const since = received.current;
    try {
      const result = await client.allSimulations({ signal: mine.signal });
      if (mine.signal.aborted) return;
      dispatch({ type: "loaded", simulations: result.simulations, since });
      setTruncated(result.truncated);
      setError(null);
    } catch (err) {
      if (mine.signal.aborted) return;
      if (isUnauthorized(err)) onUnauthorized(err);
      else setError(`Could not load simulations: ${errorMessage(err)}`);
    }
  }, [client, onUnauthorized]);

  const status = useEventStream(
    client,
    token,
    TOPICS,
    {
      onEvents: (events) => {
        received.current += 1;
        dispatch({ type: "events", events, at: received.current });
      },
      onResync: () => void refetch(),
    },
    onUnauthorized,
  );

  useEffect(() => {
    if (state.stale) void refetch();
  }, [state.stale, refetch]);

  // The form needs the populations that can play (deployed or degraded); loaded when it opens.
  useEffect(() => {
    if (!launching || !canWrite) return;
    const mine = new AbortController();
    client.allPopulations({ signal: mine.signal }).then(
      (result) => setPopulations(result.populations.filter((p) => isPlayable(p.status)).sort((a, b) => b.id - a.id)),
      (err: unknown) => {
        if (mine.signal.aborted) return;
        if (isUnauthorized(err)) onUnauthorized(err);
        else setError(`Could not load populations: ${errorMessage(err)}`);
      },
    );
    return () => mine.abort();
  }, [client, launching, canWrite, onUnauthorized]);

  const simulations = useMemo(() => sortedSimulations(state.byId), [state.byId]);
  const preselected = Number(new URLSearchParams(window.location.search).get("population")) || null;
  const choices = useMemo(() => {
    if (!populations || preselected === null) return populations;
    return [...populations].sort((a, b) => Number(b.id === preselected) - Number(a.id === preselected));
  }, [populations, preselected]);
  // A launch link to a population that is gone (or not deployed) says so instead of quietly
  // offering another one.
  const missing = populations !== null && preselected !== null && !populations.some((p) => p.id === preselected);

  return (
    <main className="page">
      <div className="page-title">
        <h1>Simulations</h1>
        <ConnectionIndicator status={status} />
        {canWrite && (
          <button
            type="button"
            className="button primary push-right"
            aria-expanded={launching}
            aria-controls="launch-simulation"
            onClick={() => setLaunching((l) => !l)}
          >
            New simulation
          </button>
        )}
      </div>

      {canWrite && launching && choices === null && <p className="empty">Loading populations…</p>}
      {canWrite && launching && missing && (
        <p className="alert" role="alert">
          Population {preselected} cannot be launched on: it was deleted or is not deployed. Choose another one below.
        </p>
      )}
      {canWrite && launching && choices !== null && (
        <LaunchSimulationForm
          client={client}
          populations={choices}
          onLaunched={(simulation) => navigate(`/simulations/${simulation.id}`)}
          onCancel={() => setLaunching(false)}
          onUnauthorized={onUnauthorized}
        />
      )}

      {error !== null && (
        <p className="alert" role="alert">
          {error}
        </p>
      )}

      <section aria-labelledby="simulations-heading">
        <div className="section-title">
          <h2 id="simulations-heading">All simulations</h2>
          {truncated && <span className="muted">showing the first {simulations.length}</span>}
        </div>
        <div className="table-wrap">
          <table className="data" aria-labelledby="simulations-heading">
            <thead>
              <tr>
                <th scope="col">ID</th>
                <th scope="col">Name</th>
                <th scope="col">Population</th>
                <th scope="col">Status</th>
                <th scope="col">Round</th>
                <th scope="col">Progress</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {simulations.map((s) => {
                const progress = state.progress.get(s.id);
                return (
                  <tr key={s.id} aria-label={`Simulation ${s.id}`}>
                    <td className="num">{s.id}</td>
                    <td>
                      <Link href={`/simulations/${s.id}`}>{s.name}</Link>
                    </td>
                    <td>
                      <Link href={`/populations/${s.population_id}`}>Population {s.population_id}</Link>
                    </td>
                    <td>
                      <StateBadge state={s.status} />
                    </td>
                    <td className="num">
                      {s.current_round} of {s.rounds}
                    </td>
                    <td className="progress-cell">
                      {progress && isActive(s.status) ? (
                        <ProgressBar
                          label={`Round progress of simulation ${s.id}`}
                          fraction={progress.total > 0 ? progress.answered / progress.total : null}
                          text={`round ${progress.round}: ${progress.answered.toLocaleString("en-US")} of ${progress.total.toLocaleString("en-US")}`}
                        />
                      ) : s.status === "failed" ? (
                        <span className="error-text" title={s.error ?? ""}>
                          {s.error}
                        </span>
                      ) : s.status === "paused" ? (
                        <span className="hosting-note" title={s.pause_reason ?? ""}>
                          {s.pause_reason}
                        </span>
                      ) : (
                        <span className="muted">{s.stop_reason ? `stopped: ${s.stop_reason}` : ""}</span>
                      )}
                    </td>
                    <td>
                      <RelativeTime iso={s.created_at} />
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
        {state.loaded && simulations.length === 0 && <p className="empty">No simulations yet. Launch one over a deployed population.</p>}
        {!state.loaded && error === null && <p className="empty">Loading simulations…</p>}
      </section>
    </main>
  );
}
