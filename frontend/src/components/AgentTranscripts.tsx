import { Fragment, useEffect, useState } from "react";
import { type ApiClient, type ApiError, errorMessage, isUnauthorized } from "../api/client";
import type { Simulation, Transcript, TranscriptPage } from "../api/types";
import { formatNumber } from "../state/simulations";
import { agentTranscriptQuery, cursorOf } from "../state/transcripts";
import { Link } from "./Link";
import { TranscriptDetail } from "./TranscriptBrowser";

const PAGE_SIZE = 20;
// The simulations offered: the population's newest ones (the API pages them).
const SIMULATIONS_SHOWN = 100;

interface AgentTranscriptsProps {
  client: ApiClient;
  agentId: number;
  populationId: number;
  onUnauthorized: (err: ApiError) => void;
}

/**
 * One agent's transcripts in a simulation of its population: per round, the prompt it was
 * sent, its raw answer, the value read from it, and why it was invalid or late.
 */
export function AgentTranscripts({ client, agentId, populationId, onUnauthorized }: AgentTranscriptsProps) {
  const [simulations, setSimulations] = useState<Simulation[] | null>(null);
  const [simulationId, setSimulationId] = useState<number | null>(null);
  // cursors[i] is the `after` of page i; the last one is the page on screen.
  const [cursors, setCursors] = useState<Array<string | null>>([null]);
  const [page, setPage] = useState<{ items: Transcript[]; next: string | null } | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [open, setOpen] = useState<number | null>(null);
  const after = cursors[cursors.length - 1] ?? null;

  useEffect(() => {
    const controller = new AbortController();
    client.simulationsPage({ populationId, after: null, limit: SIMULATIONS_SHOWN, signal: controller.signal }).then(
      (result) => {
        const newestFirst = [...result.items].sort((a, b) => b.id - a.id);
        setSimulations(newestFirst);
        setSimulationId((current) => current ?? newestFirst[0]?.id ?? null);
      },
      (err: unknown) => {
        if (controller.signal.aborted) return;
        if (isUnauthorized(err)) onUnauthorized(err);
        else setError(`Could not load the population's simulations: ${errorMessage(err)}`);
      },
    );
    return () => controller.abort();
  }, [client, populationId, onUnauthorized]);

  useEffect(() => {
    if (simulationId === null) return;
    const controller = new AbortController();
    setPage(null);
    client.request<TranscriptPage>(`/api/agents/${agentId}/transcripts${agentTranscriptQuery(simulationId, after, PAGE_SIZE)}`, { signal: controller.signal }).then(
      (result) => {
        setPage({ items: result.items, next: cursorOf(result.next_after) });
        setError(null);
      },
      (err: unknown) => {
        if (controller.signal.aborted) return;
        if (isUnauthorized(err)) onUnauthorized(err);
        else setError(`Could not load the transcripts: ${errorMessage(err)}`);
      },
    );
    return () => controller.abort();
  }, [client, agentId, simulationId, after, onUnauthorized]);

  return (
    <section aria-labelledby="agent-transcripts-heading" data-testid="agent-transcripts">
      <h2 id="agent-transcripts-heading">Transcripts</h2>
      {simulations !== null && simulations.length === 0 && <p className="empty">No simulation has played on this agent's population yet.</p>}
      {simulations !== null && simulations.length > 0 && (
        <div className="filters">
          <div>
            <label htmlFor="agent-transcripts-simulation">Simulation</label>
            <select
              id="agent-transcripts-simulation"
              value={simulationId === null ? "" : String(simulationId)}
              onChange={(e) => {
                setSimulationId(Number(e.target.value));
                setCursors([null]);
                setOpen(null);
              }}
            >
              {simulations.map((s) => (
                <option key={s.id} value={String(s.id)}>
                  #{s.id} {s.name} ({s.current_round} of {s.rounds} rounds)
                </option>
              ))}
            </select>
          </div>
          {simulationId !== null && <Link href={`/simulations/${simulationId}`}>Open simulation {simulationId}</Link>}
        </div>
      )}
      {error !== null && (
        <p className="alert" role="alert">
          {error}
        </p>
      )}
      {simulationId !== null && !page && error === null && <p className="empty">Loading transcripts…</p>}
      {page && page.items.length === 0 && <p className="empty">This agent has no kept rounds in simulation {simulationId}.</p>}
      {page && page.items.length > 0 && (
        <div className="table-wrap">
          <table className="data" aria-label="Agent transcripts">
            <thead>
              <tr>
                <th scope="col">Round</th>
                <th scope="col">Status</th>
                <th scope="col">Value</th>
                <th scope="col">Reason</th>
                <th scope="col">
                  <span className="visually-hidden">Details</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {page.items.map((t) => (
                <Fragment key={t.round}>
                  <tr aria-label={`Round ${t.round}`} data-status={t.status}>
                    <td className="num">{t.round}</td>
                    <td>
                      <span className={`badge transcript-${t.status}`}>{t.status}</span>
                    </td>
                    <td className="num">{formatNumber(t.value)}</td>
                    <td className="transcript-reason">{t.reason ?? ""}</td>
                    <td>
                      <button type="button" className="button plain small" aria-expanded={open === t.round} onClick={() => setOpen(open === t.round ? null : t.round)}>
                        {open === t.round ? "Hide" : "Show"} prompt and answer
                      </button>
                    </td>
                  </tr>
                  {open === t.round && (
                    <tr className="transcript-expanded">
                      <td colSpan={5}>
                        <TranscriptDetail transcript={t} />
                      </td>
                    </tr>
                  )}
                </Fragment>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {(cursors.length > 1 || page?.next) && (
        <nav className="pager" aria-label="Agent transcript pages">
          <button type="button" className="button plain" disabled={cursors.length <= 1} onClick={() => setCursors(cursors.slice(0, -1))}>
            Previous page
          </button>
          <button
            type="button"
            className="button plain"
            disabled={!page || page.next === null}
            onClick={() => page && page.next !== null && setCursors([...cursors, page.next])}
          >
            Next page
          </button>
        </nav>
      )}
    </section>
  );
}
