import { useEffect, useMemo, useReducer, useRef, useState } from "react";
import type { ApiClient, ApiError } from "../api/client";
import { ErrorAlert } from "../components/ErrorAlert";
import { Link } from "../components/Link";
import { ListPageTitle } from "../components/ListPageTitle";
import { ProgressBar } from "../components/ProgressBar";
import { RelativeTime } from "../components/RelativeTime";
import { StateBadge } from "../components/StateBadge";
import { YamlCreateCard } from "../components/YamlCreateCard";
import { useEventStream } from "../hooks/useEventStream";
import { useRefetch } from "../hooks/useFetched";
import { useCanWrite } from "../role";
import { Pager } from "../components/Pager";
import { navigate, setSearchParams, useSearchParam } from "../router";
import { pageParam, pageRows, parsePage } from "../state/paging";
import { hostedText, initialPopulationsState, populationsReducer, progressView, sortedPopulations } from "../state/populations";

interface PopulationsPageProps {
  client: ApiClient;
  token: string;
  onUnauthorized: (err: ApiError) => void;
}

const TOPICS = ["population:*"];

export const EXAMPLE_CONFIG = `name: education-study
size: 1000
seed: 7
distributions:
  - name: education
    categories:
      - {name: high school, weight: 0.5}
      - {name: bachelor, weight: 0.3}
      - {name: doctorate, weight: 0.2}
  - name: occupation
    given: education
    conditional:
      high school: [{name: clerk, weight: 1.0}]
      bachelor: [{name: engineer, weight: 0.5}, {name: teacher, weight: 0.5}]
      doctorate: [{name: game theory professor, weight: 1.0}]
persona:
  mode: template
  template: "You are a {occupation} whose highest education is {education}."
`;

export function PopulationsPage({ client, token, onUnauthorized }: PopulationsPageProps) {
  const [state, dispatch] = useReducer(populationsReducer, initialPopulationsState);
  // The filter and the page live in the URL (?deleted=1&page=2): reload and links keep them.
  const includeDeleted = useSearchParam("deleted") === "1";
  const page = parsePage(useSearchParam("page"));
  const setIncludeDeleted = (on: boolean) => setSearchParams({ deleted: on ? "1" : null, page: null });
  const [truncated, setTruncated] = useState(false);
  const [creating, setCreating] = useState(false);
  const canWrite = useCanWrite();

  useEffect(() => {
    document.title = "Populations · populace";
  }, []);

  const { refetch, error } = useRefetch(
    (signal) => client.allPopulations({ includeDeleted, signal }),
    (result) => {
      dispatch({ type: "loaded", populations: result.populations });
      setTruncated(result.truncated);
    },
    [client, includeDeleted],
    { failure: "Could not load populations", onUnauthorized },
  );

  const status = useEventStream(
    client,
    token,
    TOPICS,
    { onEvents: (events) => dispatch({ type: "events", events }), onResync: refetch },
    onUnauthorized,
  );

  // The filter changed, or a population we do not list yet (made in another tab) reported.
  const loadedOnce = useRef(false);
  useEffect(() => {
    if (loadedOnce.current) void refetch();
    loadedOnce.current = true;
  }, [refetch]);
  useEffect(() => {
    if (state.stale) void refetch();
  }, [state.stale, refetch]);

  const allPopulations = useMemo(() => sortedPopulations(state.byId), [state.byId]);
  const rows = pageRows(allPopulations.length, page);
  const populations = useMemo(() => allPopulations.slice(rows.start, rows.end), [allPopulations, rows.start, rows.end]);

  return (
    <main className="page">
      <ListPageTitle
        title="Populations"
        status={status}
        create={canWrite && { label: "New population", controls: "create-population", open: creating, onToggle: () => setCreating((c) => !c) }}
      />

      {creating && canWrite && <CreatePopulation client={client} onUnauthorized={onUnauthorized} onCancel={() => setCreating(false)} />}

      <ErrorAlert message={error} />

      <section aria-labelledby="populations-heading">
        <div className="section-title">
          <h2 id="populations-heading">All populations</h2>
          <label className="checkbox">
            <input type="checkbox" checked={includeDeleted} onChange={(e) => setIncludeDeleted(e.target.checked)} />
            Show deleted
          </label>
          {truncated && <span className="muted">showing the first {allPopulations.length}</span>}
        </div>
        <div className="table-wrap">
          <table className="data" aria-labelledby="populations-heading">
            <thead>
              <tr>
                <th scope="col">ID</th>
                <th scope="col">Name</th>
                <th scope="col">Size</th>
                <th scope="col">Status</th>
                <th scope="col">Progress</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {populations.map((p) => {
                const progress = state.progress.get(p.id);
                const active = p.status === "deploying" || p.status === "deleting";
                const view = progress ? progressView(progress) : null;
                return (
                  <tr key={p.id} aria-label={p.name}>
                    <td className="num">{p.id}</td>
                    <td>
                      <Link href={`/populations/${p.id}`}>{p.name}</Link>
                    </td>
                    <td className="num">{p.size.toLocaleString("en-US")}</td>
                    <td>
                      <StateBadge state={p.status} />
                      {p.status === "degraded" && <span className="hosting-note">{hostedText(p)}</span>}
                    </td>
                    <td className="progress-cell">
                      {active ? (
                        <ProgressBar label={`Progress of ${p.name}`} fraction={view?.fraction ?? null} text={view?.label ?? "waiting…"} />
                      ) : p.status === "failed" ? (
                        <span className="error-text" title={p.error ?? ""}>
                          {p.error}
                        </span>
                      ) : (
                        <span className="muted">{view?.label ?? ""}</span>
                      )}
                    </td>
                    <td>
                      <RelativeTime iso={p.created_at} />
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
        <Pager label="Population pages" total={allPopulations.length} page={rows.page} onPage={(n) => setSearchParams({ page: pageParam(n) })} />
        {state.loaded && allPopulations.length === 0 && (
          <p className="empty">
            No populations yet.{" "}
            {canWrite ? (
              <button type="button" className="link-button" aria-controls="create-population" onClick={() => setCreating(true)}>
                Create one from a YAML config
              </button>
            ) : (
              "An operator creates them from a YAML config."
            )}
          </p>
        )}
        {!state.loaded && error === null && <p className="empty">Loading populations…</p>}
      </section>
    </main>
  );
}

/** The create card: a population config in YAML, checked by the manager line by line. */
function CreatePopulation({ client, onUnauthorized, onCancel }: { client: ApiClient; onUnauthorized: (err: ApiError) => void; onCancel: () => void }) {
  return (
    <YamlCreateCard
      client={client}
      model="PopulationConfig"
      id="create-population"
      title="New population"
      intro={
        <>
          Distributions of attributes (categories with weights, conditionals, numeric bins) and how each agent's persona is written. The manager checks
          the config and points at the line of every problem.
        </>
      }
      editorLabel="Population config (YAML)"
      initialText={EXAMPLE_CONFIG}
      submitLabel="Create population"
      doing="create the population"
      create={(text) => client.createPopulation(text)}
      onCreated={(population) => navigate(`/populations/${population.id}`)}
      onCancel={onCancel}
      onUnauthorized={onUnauthorized}
    />
  );
}
