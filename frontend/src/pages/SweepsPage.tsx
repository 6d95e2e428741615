import { useEffect, useMemo, useReducer, useState } from "react";
import type { ApiClient, ApiError } from "../api/client";
import { ErrorAlert } from "../components/ErrorAlert";
import { Link } from "../components/Link";
import { ListPageTitle } from "../components/ListPageTitle";
import { PopulationList, usePopulations } from "../components/PopulationName";
import { RelativeTime } from "../components/RelativeTime";
import { StateBadge } from "../components/StateBadge";
import { YamlCreateCard } from "../components/YamlCreateCard";
import { useEventStream } from "../hooks/useEventStream";
import { useRefetch } from "../hooks/useFetched";
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
  const [creating, setCreating] = useState(false);
  const canWrite = useCanWrite();

  useEffect(() => {
    document.title = "Sweeps · populace";
  }, []);

  const { refetch, error } = useRefetch(
    (signal) => listSweeps(client, signal),
    (sweeps) => dispatch({ type: "loaded", sweeps }),
    [client],
    { failure: "Could not load sweeps", onUnauthorized },
  );

  const status = useEventStream(
    client,
    token,
    TOPICS,
    { onEvents: (events) => dispatch({ type: "events", events }), onResync: refetch },
    onUnauthorized,
  );

  useEffect(() => {
    if (state.stale) void refetch();
  }, [state.stale, refetch]);

  const sweeps = useMemo(() => sortedSweeps(state.byId), [state.byId]);
  const populationIds = useMemo(() => sweeps.flatMap((s) => s.populations ?? []), [sweeps]);
  const populations = usePopulations(client, populationIds, onUnauthorized);

  return (
    <main className="page">
      <ListPageTitle
        title="Sweeps"
        status={status}
        create={canWrite && { label: "New sweep", controls: "create-sweep", open: creating, onToggle: () => setCreating((c) => !c) }}
      />

      {creating && canWrite && <CreateSweep client={client} onUnauthorized={onUnauthorized} onCancel={() => setCreating(false)} />}

      <ErrorAlert message={error} />

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
                <th scope="col">Populations</th>
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
                  <td>
                    <PopulationList ids={s.populations ?? []} populations={populations} />
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
        {state.loaded && sweeps.length === 0 && (
          <p className="empty">
            No sweeps yet.{" "}
            {canWrite ? (
              <button type="button" className="link-button" aria-controls="create-sweep" onClick={() => setCreating(true)}>
                Launch a grid of simulations from a YAML sweep file
              </button>
            ) : (
              "An operator launches them from a YAML sweep file."
            )}
          </p>
        )}
        {!state.loaded && error === null && <p className="empty">Loading sweeps…</p>}
      </section>
    </main>
  );
}

/** The create card: a sweep file in YAML; every point is checked before anything starts. */
function CreateSweep({ client, onUnauthorized, onCancel }: { client: ApiClient; onUnauthorized: (err: ApiError) => void; onCancel: () => void }) {
  return (
    <YamlCreateCard
      client={client}
      model="SweepConfig"
      id="create-sweep"
      title="New sweep"
      intro={
        <>
          A simulation config as <code>base</code> (without <code>population_id</code>), and a <code>grid</code> of dotted fields with the values to try:
          one run per combination, on the <code>populations</code> listed. Every point is checked before anything starts.
        </>
      }
      editorLabel="Sweep file (YAML)"
      initialText={EXAMPLE_SWEEP}
      submitLabel="Launch sweep"
      doing="launch the sweep"
      create={(text) => createSweep(client, text)}
      onCreated={(sweep) => navigate(`/sweeps/${sweep.id}`)}
      onCancel={onCancel}
      onUnauthorized={onUnauthorized}
    />
  );
}
