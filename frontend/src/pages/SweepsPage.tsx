import { useCallback, useEffect, useMemo, useReducer, useRef, useState, type FormEvent } from "react";
import { ApiError, type ApiClient, errorMessage, isUnauthorized } from "../api/client";
import type { ValidationIssue } from "../api/types";
import { ConnectionIndicator } from "../components/ConnectionIndicator";
import { Link } from "../components/Link";
import { RelativeTime } from "../components/RelativeTime";
import { StateBadge } from "../components/StateBadge";
import { YamlEditor } from "../components/YamlEditor";
import { useEventStream } from "../hooks/useEventStream";
import { useCanWrite } from "../role";
import { navigate } from "../router";
import { EXAMPLE_SWEEP, createSweep, initialSweepsState, listSweeps, sortedSweeps, sweepsReducer } from "../state/sweeps";

interface SweepsPageProps {
  client: ApiClient;
  token: string;
  onUnauthorized: (err: ApiError) => void;
}

const TOPICS = ["sweep:*"];

export function SweepsPage({ client, token, onUnauthorized }: SweepsPageProps) {
  const [state, dispatch] = useReducer(sweepsReducer, initialSweepsState);
  const [error, setError] = useState<string | null>(null);
  const [creating, setCreating] = useState(false);
  const controller = useRef<AbortController | null>(null);
  const canWrite = useCanWrite();

  useEffect(() => {
    document.title = "Sweeps · populace";
    return () => controller.current?.abort();
  }, []);

  const refetch = useCallback(async () => {
    controller.current?.abort();
    const mine = new AbortController();
    controller.current = mine;
    try {
      const sweeps = await listSweeps(client, mine.signal);
      if (mine.signal.aborted) return;
      dispatch({ type: "loaded", sweeps });
      setError(null);
    } catch (err) {
      if (mine.signal.aborted) return;
      if (isUnauthorized(err)) onUnauthorized(err);
      else setError(`Could not load sweeps: ${errorMessage(err)}`);
    }
  }, [client, onUnauthorized]);

  const status = useEventStream(
    client,
    token,
    TOPICS,
    { onEvents: (events) => dispatch({ type: "events", events }), onResync: () => void refetch() },
    onUnauthorized,
  );

  useEffect(() => {
    if (state.stale) void refetch();
  }, [state.stale, refetch]);

  const sweeps = useMemo(() => sortedSweeps(state.byId), [state.byId]);

  return (
    <main className="page">
      <div className="page-title">
        <h1>Sweeps</h1>
        <ConnectionIndicator status={status} />
        {canWrite && (
          <button
            type="button"
            className="button primary push-right"
            aria-expanded={creating}
            aria-controls="create-sweep"
            onClick={() => setCreating((c) => !c)}
          >
            New sweep
          </button>
        )}
      </div>

      {creating && canWrite && <CreateSweep client={client} onUnauthorized={onUnauthorized} onCancel={() => setCreating(false)} />}

      {error !== null && (
        <p className="alert" role="alert">
          {error}
        </p>
      )}

      <section aria-labelledby="sweeps-heading">
        <div className="section-title">
          <h2 id="sweeps-heading">All sweeps</h2>
        </div>
        <div className="table-wrap">
          <table className="data" aria-labelledby="sweeps-heading">
            <thead>
              <tr>
                <th scope="col">ID</th>
                <th scope="col">Name</th>
                <th scope="col">Mode</th>
                <th scope="col">Runs</th>
                <th scope="col">Status</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {sweeps.map((s) => (
                <tr key={s.id} aria-label={s.name}>
                  <td className="num">{s.id}</td>
                  <td>
                    <Link href={`/sweeps/${s.id}`}>{s.name}</Link>
                  </td>
                  <td>{s.mode}</td>
                  <td className="num">{s.runs}</td>
                  <td>
                    <StateBadge state={s.status} />
                    {s.status === "failed" && s.error && (
                      <span className="error-text" title={s.error}>
                        {" "}
                        {s.error}
                      </span>
                    )}
                  </td>
                  <td>
                    <RelativeTime iso={s.created_at} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        {state.loaded && sweeps.length === 0 && <p className="empty">No sweeps yet. Launch a grid of simulations from a YAML sweep file.</p>}
        {!state.loaded && error === null && <p className="empty">Loading sweeps…</p>}
      </section>
    </main>
  );
}

interface CreateSweepProps {
  client: ApiClient;
  onUnauthorized: (err: ApiError) => void;
  onCancel: () => void;
}

function CreateSweep({ client, onUnauthorized, onCancel }: CreateSweepProps) {
  const [text, setText] = useState(EXAMPLE_SWEEP);
  const [issues, setIssues] = useState<ValidationIssue[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [pending, setPending] = useState(false);

  async function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    setPending(true);
    setError(null);
    try {
      const sweep = await createSweep(client, text);
      setIssues([]);
      navigate(`/sweeps/${sweep.id}`);
    } catch (err) {
      setPending(false);
      if (isUnauthorized(err)) return onUnauthorized(err);
      if (err instanceof ApiError && err.status === 422 && err.issues.length > 0) {
        setIssues(err.issues);
      } else {
        setIssues([]);
        setError(`Could not launch the sweep: ${errorMessage(err)}`);
      }
    }
  }

  return (
    <section id="create-sweep" className="card create-card" aria-labelledby="create-sweep-heading">
      <h2 id="create-sweep-heading">New sweep</h2>
      <p className="muted">
        A simulation config as <code>base</code> (without <code>population_id</code>), and a <code>grid</code> of dotted fields with the values to try:
        one run per combination, on the <code>populations</code> listed. Every point is checked before anything starts.
      </p>
      <form onSubmit={submit} aria-busy={pending}>
        <YamlEditor label="Sweep file (YAML)" value={text} onChange={setText} issues={issues} />
        {error !== null && (
          <p className="alert" role="alert">
            {error}
          </p>
        )}
        <div className="form-actions">
          <button type="submit" className="button primary" disabled={pending}>
            Launch sweep
          </button>
          <button type="button" className="button plain" onClick={onCancel}>
            Cancel
          </button>
        </div>
      </form>
    </section>
  );
}
