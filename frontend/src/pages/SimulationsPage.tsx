import { useEffect, useMemo, useReducer, useRef, useState } from "react";
import { type ApiClient, type ApiError, errorMessage, isUnauthorized } from "../api/client";
import type { Population } from "../api/types";
import { LaunchSimulationForm } from "../components/LaunchSimulationForm";
import { Link } from "../components/Link";
import { ListPageTitle } from "../components/ListPageTitle";
import { ProgressBar } from "../components/ProgressBar";
import { RelativeTime } from "../components/RelativeTime";
import { StateBadge } from "../components/StateBadge";
import { Clip, TableScroll } from "../components/TableScroll";
import { useEventStream } from "../hooks/useEventStream";
import { useRefetch } from "../hooks/useFetched";
import { useCanWrite } from "../role";
import { Pager } from "../components/Pager";
import { PopulationName, populationLabel, usePopulations } from "../components/PopulationName";
import { navigate, setSearchParams, useSearchParam } from "../router";
import { pageParam, pageRows, parsePage } from "../state/paging";
import { compareHref, MAX_COMPARED, toggleSelected } from "../state/compare";
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
  // `clone=ID` (from a run's "Clone into launch form") opens the form, which prefills from that run.
  const [launching, setLaunching] = useState(() => {
    const params = new URLSearchParams(window.location.search);
    return params.has("launch") || params.has("clone");
  });
  // Runs ticked for comparison, in the order they were picked.
  const [selected, setSelected] = useState<number[]>([]);
  const [populations, setPopulations] = useState<Population[] | null>(null);
  const canWrite = useCanWrite();
  // Batches of events received so far: orders the list against the events (see SimulationAction).
  const received = useRef(0);

  useEffect(() => {
    document.title = "Simulations · populace";
  }, []);

  const { refetch, error, setError } = useRefetch(
    async (signal) => {
      const since = received.current;
      return { since, ...(await client.allSimulations({ signal })) };
    },
    ({ simulations, truncated, since }) => {
      dispatch({ type: "loaded", simulations, since });
      setTruncated(truncated);
    },
    [client],
    { failure: "Could not load simulations", onUnauthorized },
  );

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

  // Filters and the page live in the URL (?status=running&population_id=3&page=2).
  const statusFilter = useSearchParam("status");
  const populationFilter = Number(useSearchParam("population_id")) || null;
  const page = parsePage(useSearchParam("page"));
  const allSimulations = useMemo(() => sortedSimulations(state.byId), [state.byId]);
  const filtered = useMemo(
    () => allSimulations.filter((s) => (statusFilter === null || s.status === statusFilter) && (populationFilter === null || s.population_id === populationFilter)),
    [allSimulations, statusFilter, populationFilter],
  );
  const rows = pageRows(filtered.length, page);
  const simulations = useMemo(() => filtered.slice(rows.start, rows.end), [filtered, rows.start, rows.end]);
  const listedPopulations = useMemo(() => [...new Set(allSimulations.map((s) => s.population_id))].sort((a, b) => b - a), [allSimulations]);
  // Names for the Population column and filter (a simulation row carries only the id).
  const populationNames = usePopulations(client, listedPopulations, onUnauthorized);
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
      <ListPageTitle
        title="Simulations"
        status={status}
        create={canWrite && { label: "New simulation", controls: "launch-simulation", open: launching, onToggle: () => setLaunching((l) => !l) }}
      />

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
          {truncated && <span className="muted">showing the first {allSimulations.length}</span>}
          <label className="inline-filter">
            Status{" "}
            <select aria-label="Filter by status" value={statusFilter ?? ""} onChange={(e) => setSearchParams({ status: e.target.value || null, page: null })}>
              <option value="">any</option>
              {["pending", "running", "paused", "completed", "failed", "cancelled"].map((st) => (
                <option key={st} value={st}>
                  {st}
                </option>
              ))}
            </select>
          </label>
          <label className="inline-filter">
            Population{" "}
            <select aria-label="Filter by population" value={populationFilter ?? ""} onChange={(e) => setSearchParams({ population_id: e.target.value || null, page: null })}>
              <option value="">any</option>
              {listedPopulations.map((id) => (
                <option key={id} value={id}>
                  {populationLabel(populationNames.get(id), id)} (#{id})
                </option>
              ))}
            </select>
          </label>
          <div className="push-right inline-actions">
            {selected.length > 0 && (
              <button type="button" className="button plain small" onClick={() => setSelected([])}>
                Clear selection
              </button>
            )}
            <button
              type="button"
              className="button plain"
              disabled={selected.length < 2}
              title={selected.length < 2 ? "Tick two or more runs to compare" : undefined}
              onClick={() => navigate(compareHref(selected))}
            >
              Compare selected{selected.length > 0 ? ` (${selected.length})` : ""}
            </button>
          </div>
        </div>
        <TableScroll label="All simulations" pinFirst>
          <table className="data" aria-labelledby="simulations-heading">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">ID</th>
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
                    <td>
                      <span className="run-name-cell">
                        <input
                          type="checkbox"
                          aria-label={`Select simulation ${s.id} for comparison`}
                          checked={selected.includes(s.id)}
                          disabled={!selected.includes(s.id) && selected.length >= MAX_COMPARED}
                          onChange={() => setSelected((current) => toggleSelected(current, s.id))}
                        />
                        <Clip text={s.name}>
                          <Link href={`/simulations/${s.id}`}>{s.name}</Link>
                        </Clip>
                      </span>
                    </td>
                    <td className="num">{s.id}</td>
                    <td>
                      <PopulationName id={s.population_id} population={populationNames.get(s.population_id)} />
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
                        <span className="error-text cell-clip" title={s.error ?? ""}>
                          {s.error}
                        </span>
                      ) : s.status === "paused" ? (
                        <span className="hosting-note cell-clip" title={s.pause_reason ?? ""}>
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
        </TableScroll>
        <Pager label="Simulation pages" total={filtered.length} page={rows.page} onPage={(n) => setSearchParams({ page: pageParam(n) })} />
        {state.loaded && allSimulations.length > 0 && filtered.length === 0 && <p className="empty">No simulations match these filters.</p>}
        {state.loaded && allSimulations.length === 0 && <p className="empty">No simulations yet. Launch one over a deployed population.</p>}
        {!state.loaded && error === null && <p className="empty">Loading simulations…</p>}
      </section>
    </main>
  );
}
