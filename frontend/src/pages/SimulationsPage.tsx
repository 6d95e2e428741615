import { useEffect, useMemo, useReducer, useRef, useState } from "react";
import type { ApiClient, ApiError } from "../api/client";
import { type SimulationFilters, allSimulations } from "../api/simulationList";
import { SIMULATION_STATUSES } from "../api/types";
import { Link } from "../components/Link";
import { ListPageTitle } from "../components/ListPageTitle";
import { ProgressBar } from "../components/ProgressBar";
import { RelativeTime } from "../components/RelativeTime";
import { ColumnsChooser, SortableHeader } from "../components/RunsTableControls";
import { StateBadge } from "../components/StateBadge";
import { Clip, TableScroll } from "../components/TableScroll";
import { useEventStream } from "../hooks/useEventStream";
import { useRefetch } from "../hooks/useFetched";
import { useRunFilterChoices } from "../hooks/useRunFilterChoices";
import { useSettled } from "../hooks/useSettled";
import { useCanWrite } from "../role";
import { Pager } from "../components/Pager";
import { PopulationName, populationLabel, usePopulations } from "../components/PopulationName";
import { navigate, setSearchParams, useSearch } from "../router";
import { pageParam, pageRows } from "../state/paging";
import { compareHref, MAX_COMPARED, toggleSelected } from "../state/compare";
import { launchPageHref } from "../state/pluginLaunch";
import {
  cellText,
  changeQuery,
  columnChoices,
  isFiltered,
  metricValue,
  paramValue,
  parseRunsQuery,
  RUN_COLUMNS,
  type RunColumn,
  runLabel,
  type RunSort,
  type RunsQuery,
  runsQueryParams,
  serverQuery,
  shownRuns,
  toggled,
} from "../state/runsTable";
import { initialSimulationsState, isActive, simulationsReducer } from "../state/simulations";

interface SimulationsPageProps {
  client: ApiClient;
  token: string;
  onUnauthorized: (err: ApiError) => void;
}

const TOPICS = ["simulation:*"];
// The name typed in the search box is asked for once it rests this long.
const SEARCH_SETTLE_MS = 300;
// The statuses offered together in the status filter (any list can come in the URL).
const STATUS_GROUPS = [
  { value: "pending,running,paused", label: "active" },
  { value: "completed,failed,cancelled", label: "finished" },
];

export function SimulationsPage({ client, token, onUnauthorized }: SimulationsPageProps) {
  const [state, dispatch] = useReducer(simulationsReducer, initialSimulationsState);
  const [truncated, setTruncated] = useState(false);
  // Runs ticked for comparison, in the order they were picked.
  const [selected, setSelected] = useState<number[]>([]);
  const canWrite = useCanWrite();
  // Batches of events received so far: orders the list against the events (see SimulationAction).
  const received = useRef(0);

  useEffect(() => {
    document.title = "Simulations · populace";
  }, []);

  // What the table shows lives in the URL (state/runsTable.ts): a reload, a shared link or the
  // back button from a run shows the same table.
  const search = useSearch();
  const query = useMemo(() => parseRunsQuery(search), [search]);
  const setQuery = (change: Partial<RunsQuery>) => setSearchParams(runsQueryParams(changeQuery(query, change)));

  // The manager filters and sorts: asked again when the URL's filters or sort change (the name
  // typed in the search box a moment after the last key).
  const listing = serverQuery(query);
  const typed = useSettled(listing.q, SEARCH_SETTLE_MS);
  const filters = { ...listing, q: typed };
  const filtersKey = JSON.stringify(filters);
  const { refetch, error } = useRefetch(
    async (signal) => {
      const since = received.current;
      return { since, ...(await allSimulations(client, { filters: JSON.parse(filtersKey) as SimulationFilters, signal })) };
    },
    ({ simulations, truncated, since }) => {
      dispatch({ type: "loaded", simulations, since });
      setTruncated(truncated);
    },
    [client, filtersKey],
    { failure: "Could not load simulations", onUnauthorized },
  );

  // The first load comes with the event stream's first connection; a change of filters loads again.
  const loadedFilters = useRef(filtersKey);
  useEffect(() => {
    if (loadedFilters.current === filtersKey) return;
    loadedFilters.current = filtersKey;
    void refetch();
  }, [filtersKey, refetch]);

  const status = useEventStream(
    client,
    token,
    TOPICS,
    {
      onEvents: (events) => {
        received.current += 1;
        dispatch({ type: "events", events, at: received.current });
      },
      onResync: refetch,
    },
    onUnauthorized,
  );

  useEffect(() => {
    if (state.stale) void refetch();
  }, [state.stale, refetch]);

  // The launch form has a page of its own (/simulations/new): older links (?launch&population=ID,
  // ?clone=ID) lead there, for an operator (a viewer stays on the runs).
  useEffect(() => {
    const href = launchPageHref(window.location.search);
    if (canWrite && href) navigate(href, { replace: true });
  }, [canWrite]);

  const runs = useMemo(() => [...state.byId.values()], [state.byId]);
  const shown = useMemo(() => shownRuns(runs, query), [runs, query]);
  const rows = pageRows(shown.length, query.page);
  const simulations = useMemo(() => shown.slice(rows.start, rows.end), [shown, rows.start, rows.end]);
  const { choices: filterChoices, error: choicesError } = useRunFilterChoices(client, onUnauthorized);
  const shownPopulations = useMemo(
    () => [...new Set([...simulations.map((s) => s.population_id), ...(query.populationId === null ? [] : [query.populationId])])],
    [simulations, query.populationId],
  );
  // Names for the Population column (a simulation row carries only the id).
  const populationNames = usePopulations(client, shownPopulations, onUnauthorized);
  const populationChoices = useMemo(() => {
    const ids = new Set([...(filterChoices?.populations ?? []).map((p) => p.id), ...shownPopulations]);
    const byId = new Map((filterChoices?.populations ?? []).map((p) => [p.id, p] as const));
    return [...ids].sort((a, b) => b - a).map((id) => ({ id, label: populationLabel(byId.get(id) ?? populationNames.get(id), id) }));
  }, [filterChoices, shownPopulations, populationNames]);
  const sweepChoices = useMemo(() => {
    const sweeps = (filterChoices?.sweeps ?? []).map((w) => ({ id: w.id, name: w.name }));
    if (query.sweepId !== null && !sweeps.some((w) => w.id === query.sweepId)) sweeps.push({ id: query.sweepId, name: `sweep ${query.sweepId}` });
    return sweeps;
  }, [filterChoices, query.sweepId]);
  const pluginChoices = useMemo(
    () => [...new Set([...(filterChoices?.plugins ?? []).map((p) => p.name), ...runs.flatMap((s) => (s.plugin ? [s.plugin] : [])), ...(query.plugin ? [query.plugin] : [])])].sort(),
    [filterChoices, runs, query.plugin],
  );
  const statusChoice = query.statuses.join(",");
  const statusOptions = useMemo(() => {
    const options = [...SIMULATION_STATUSES.map((st) => ({ value: st, label: st })), ...STATUS_GROUPS];
    if (statusChoice && !options.some((o) => o.value === statusChoice)) options.push({ value: statusChoice, label: query.statuses.join(", ") });
    return options;
  }, [statusChoice, query.statuses]);
  // Columns: the params and metrics of the runs loaded, and any the URL names.
  const available = useMemo(() => columnChoices(runs), [runs]);
  const paramChoices = useMemo(() => [...new Set([...available.params, ...query.params])].sort(), [available.params, query.params]);
  const metricChoices = useMemo(() => [...new Set([...available.metrics, ...query.metrics])].sort(), [available.metrics, query.metrics]);
  const metricTitles = useMemo(() => {
    // Plugins may declare a metric of the same name (guess's and bounded_confidence's `mean`):
    // the title comes from a plugin of the runs listed first.
    const listed = new Set(runs.flatMap((s) => (s.plugin ? [s.plugin] : [])));
    const plugins = [...(filterChoices?.plugins ?? [])].sort((a, b) => Number(listed.has(b.name)) - Number(listed.has(a.name)));
    const titles = new Map<string, string>();
    for (const plugin of plugins) for (const m of plugin.metrics) if (!titles.has(m.name)) titles.set(m.name, m.title);
    return titles;
  }, [filterChoices, runs]);
  const metricTitle = (name: string) => metricTitles.get(name) ?? name;
  const shows = (column: RunColumn) => !query.hidden.includes(column);
  const column = (id: RunColumn) => RUN_COLUMNS.find((c) => c.id === id)!;
  const sortBy = (sort: RunSort) => setQuery({ sort });
  const header = (id: RunColumn) => shows(id) && <SortableHeader label={column(id).label} sortKey={column(id).sort} sort={query.sort} onSort={sortBy} />;
  // The search box shows what is typed; the URL follows it key by key (replaceState).
  const [typing, setTyping] = useState(query.q);
  useEffect(() => setTyping(query.q), [query.q]);
  return (
    <main className="page">
      <ListPageTitle
        title="Simulations"
        status={status}
        create={canWrite && { label: "New simulation", href: query.plugin ? `/simulations/new?plugin=${encodeURIComponent(query.plugin)}` : "/simulations/new" }}
      />

      {(error ?? choicesError) !== null && (
        <p className="alert" role="alert">
          {error ?? choicesError}
        </p>
      )}

      <section aria-labelledby="simulations-heading">
        <div className="section-title">
          <h2 id="simulations-heading">All simulations</h2>
          {truncated && <span className="muted">showing the first {runs.length}</span>}
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
        <div className="runs-filters" role="search" aria-label="Find simulations">
          <label className="inline-filter">
            Name{" "}
            <input
              type="search"
              aria-label="Search by name"
              placeholder="contains…"
              maxLength={200}
              value={typing}
              onChange={(e) => {
                setTyping(e.target.value);
                setQuery({ q: e.target.value });
              }}
            />
          </label>
          <label className="inline-filter">
            Status{" "}
            <select aria-label="Filter by status" value={statusChoice} onChange={(e) => setQuery({ statuses: parseRunsQuery(`status=${e.target.value}`).statuses })}>
              <option value="">any</option>
              {statusOptions.map((o) => (
                <option key={o.value} value={o.value}>
                  {o.label}
                </option>
              ))}
            </select>
          </label>
          <label className="inline-filter">
            Population{" "}
            <select aria-label="Filter by population" value={query.populationId ?? ""} onChange={(e) => setQuery({ populationId: Number(e.target.value) || null })}>
              <option value="">any</option>
              {populationChoices.map(({ id, label }) => (
                <option key={id} value={id}>
                  {label} (#{id})
                </option>
              ))}
            </select>
          </label>
          <label className="inline-filter">
            Plugin{" "}
            <select aria-label="Filter by plugin" value={query.plugin ?? ""} onChange={(e) => setQuery({ plugin: e.target.value || null })}>
              <option value="">any</option>
              {pluginChoices.map((name) => (
                <option key={name} value={name}>
                  {name}
                </option>
              ))}
            </select>
          </label>
          <label className="inline-filter">
            Sweep{" "}
            <select aria-label="Filter by sweep" value={query.sweepId ?? ""} onChange={(e) => setQuery({ sweepId: Number(e.target.value) || null })}>
              <option value="">any</option>
              {sweepChoices.map(({ id, name }) => (
                <option key={id} value={id}>
                  {name} (#{id})
                </option>
              ))}
            </select>
          </label>
          <ColumnsChooser
            chosen={query}
            params={paramChoices}
            metrics={metricChoices}
            metricTitle={metricTitle}
            onToggleColumn={(c) => setQuery({ hidden: toggled(query.hidden, c) })}
            onToggleParam={(path) => setQuery({ params: toggled(query.params, path) })}
            onToggleMetric={(name) => setQuery({ metrics: toggled(query.metrics, name) })}
          />
        </div>
        <TableScroll label="All simulations" pinFirst>
          <table className="data runs-table" aria-labelledby="simulations-heading">
            <thead>
              <tr>
                <SortableHeader label="Name" sortKey="name" sort={query.sort} onSort={sortBy} />
                {header("id")}
                {header("population")}
                {header("plugin")}
                {header("status")}
                {header("round")}
                {header("progress")}
                {header("created")}
                {query.params.map((path) => (
                  <SortableHeader key={`p-${path}`} label={path} sortKey={`param:${path}`} sort={query.sort} onSort={sortBy} className="num" title={`plugin.params.${path}`} />
                ))}
                {query.metrics.map((name) => (
                  <SortableHeader
                    key={`m-${name}`}
                    label={`${metricTitle(name)} (final)`}
                    sortKey={`metric:${name}`}
                    sort={query.sort}
                    onSort={sortBy}
                    className="num"
                    title={`${name}: its value in the run's last kept round`}
                  />
                ))}
              </tr>
            </thead>
            <tbody>
              {simulations.map((s) => {
                const progress = state.progress.get(s.id);
                const label = runLabel(s);
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
                        <Clip text={label === s.name ? s.name : `${label} (${s.name})`}>
                          <Link href={`/simulations/${s.id}`}>{label}</Link>
                        </Clip>
                      </span>
                    </td>
                    {shows("id") && <td className="num">{s.id}</td>}
                    {shows("population") && (
                      <td>
                        <PopulationName id={s.population_id} population={populationNames.get(s.population_id)} />
                      </td>
                    )}
                    {shows("plugin") && <td>{s.plugin ?? <span className="muted">–</span>}</td>}
                    {shows("status") && (
                      <td>
                        <StateBadge state={s.status} />
                      </td>
                    )}
                    {shows("round") && (
                      <td className="num">
                        {s.current_round} of {s.rounds}
                      </td>
                    )}
                    {shows("progress") && (
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
                    )}
                    {shows("created") && (
                      <td>
                        <RelativeTime iso={s.created_at} />
                      </td>
                    )}
                    {query.params.map((path) => {
                      const text = cellText(paramValue(s, path));
                      return (
                        <td key={`p-${path}`} className="num">
                          <Clip text={text} />
                        </td>
                      );
                    })}
                    {query.metrics.map((name) => (
                      <td key={`m-${name}`} className="num">
                        {cellText(metricValue(s, name))}
                      </td>
                    ))}
                  </tr>
                );
              })}
            </tbody>
          </table>
        </TableScroll>
        <Pager label="Simulation pages" total={shown.length} page={rows.page} onPage={(n) => setSearchParams({ page: pageParam(n) })} />
        {state.loaded && shown.length === 0 && isFiltered(query) && (
          <p className="empty">
            No simulations match these filters. <Link href="/simulations">Clear the filters</Link>
          </p>
        )}
        {state.loaded && shown.length === 0 && !isFiltered(query) && (
          <p className="empty">
            No simulations yet. {canWrite ? <Link href="/simulations/new">Launch one over a deployed population</Link> : "An operator launches them over a deployed population."}
          </p>
        )}
        {!state.loaded && error === null && <p className="empty">Loading simulations…</p>}
      </section>
    </main>
  );
}
