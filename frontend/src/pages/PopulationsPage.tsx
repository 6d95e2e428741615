import { useCallback, useEffect, useMemo, useReducer, useRef, useState, type FormEvent } from "react";
import { ApiError, type ApiClient, errorMessage, isUnauthorized } from "../api/client";
import type { ValidationIssue } from "../api/types";
import { ConnectionIndicator } from "../components/ConnectionIndicator";
import { Link } from "../components/Link";
import { ProgressBar } from "../components/ProgressBar";
import { RelativeTime } from "../components/RelativeTime";
import { StateBadge } from "../components/StateBadge";
import { YamlEditor } from "../components/YamlEditor";
import { useEventStream } from "../hooks/useEventStream";
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
  const [error, setError] = useState<string | null>(null);
  const [creating, setCreating] = useState(false);
  const controller = useRef<AbortController | null>(null);
  const canWrite = useCanWrite();

  useEffect(() => {
    document.title = "Populations · populace";
    return () => controller.current?.abort();
  }, []);

  const refetch = useCallback(async () => {
    controller.current?.abort();
    const mine = new AbortController();
    controller.current = mine;
    try {
      const result = await client.allPopulations({ includeDeleted, signal: mine.signal });
      if (mine.signal.aborted) return;
      dispatch({ type: "loaded", populations: result.populations });
      setTruncated(result.truncated);
      setError(null);
    } catch (err) {
      if (mine.signal.aborted) return;
      if (isUnauthorized(err)) onUnauthorized(err);
      else setError(`Could not load populations: ${errorMessage(err)}`);
    }
  }, [client, includeDeleted, onUnauthorized]);

  const status = useEventStream(
    client,
    token,
    TOPICS,
    { onEvents: (events) => dispatch({ type: "events", events }), onResync: () => void refetch() },
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
      <div className="page-title">
        <h1>Populations</h1>
        <ConnectionIndicator status={status} />
        {canWrite && (
          <button
            type="button"
            className="button primary push-right"
            aria-expanded={creating}
            aria-controls="create-population"
            onClick={() => setCreating((c) => !c)}
          >
            New population
          </button>
        )}
      </div>

      {creating && canWrite && <CreatePopulation client={client} onUnauthorized={onUnauthorized} onCancel={() => setCreating(false)} />}

      {error !== null && (
        <p className="alert" role="alert">
          {error}
        </p>
      )}

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
        {state.loaded && allPopulations.length === 0 && <p className="empty">No populations yet. Create one from a YAML config.</p>}
        {!state.loaded && error === null && <p className="empty">Loading populations…</p>}
      </section>
    </main>
  );
}

interface CreatePopulationProps {
  client: ApiClient;
  onUnauthorized: (err: ApiError) => void;
  onCancel: () => void;
}

function CreatePopulation({ client, onUnauthorized, onCancel }: CreatePopulationProps) {
  const [text, setText] = useState(EXAMPLE_CONFIG);
  const [issues, setIssues] = useState<ValidationIssue[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [pending, setPending] = useState(false);

  async function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    setPending(true);
    setError(null);
    try {
      const population = await client.createPopulation(text);
      setIssues([]);
      navigate(`/populations/${population.id}`);
    } catch (err) {
      setPending(false);
      if (isUnauthorized(err)) return onUnauthorized(err);
      if (err instanceof ApiError && err.status === 422 && err.issues.length > 0) {
        setIssues(err.issues);
      } else {
        setIssues([]);
        setError(`Could not create the population: ${errorMessage(err)}`);
      }
    }
  }

  return (
    <section id="create-population" className="card create-card" aria-labelledby="create-heading">
      <h2 id="create-heading">New population</h2>
      <p className="muted">
        Distributions of attributes (categories with weights, conditionals, numeric bins) and how each agent's persona is written.
        The manager checks the config and points at the line of every problem.
      </p>
      <form onSubmit={submit} aria-busy={pending}>
        <YamlEditor label="Population config (YAML)" value={text} onChange={setText} issues={issues} />
        {error !== null && (
          <p className="alert" role="alert">
            {error}
          </p>
        )}
        <div className="form-actions">
          <button type="submit" className="button primary" disabled={pending}>
            Create population
          </button>
          <button type="button" className="button plain" onClick={onCancel}>
            Cancel
          </button>
        </div>
      </form>
    </section>
  );
}
