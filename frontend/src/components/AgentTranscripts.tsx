import { useState } from "react";
import type { ApiClient, ApiError } from "../api/client";
import { answer } from "../api/typedApi";
import type { TranscriptPage } from "../api/types";
import { useFetched } from "../hooks/useFetched";
import { usePopulationSimulations } from "../hooks/usePopulationSimulations";
import { agentTranscriptQuery, cursorOf } from "../state/transcripts";
import { CursorPager } from "./CursorPager";
import { ErrorAlert } from "./ErrorAlert";
import { Link } from "./Link";
import { LaunchOn } from "./LaunchOn";
import { TableScroll } from "./TableScroll";
import { TranscriptRow } from "./TranscriptBrowser";

const PAGE_SIZE = 20;

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
  const { simulations, simulationId, pick, error: simulationsError } = usePopulationSimulations(client, populationId, onUnauthorized);
  // cursors[i] is the `after` of page i; the last one is the page on screen.
  const [cursors, setCursors] = useState<Array<string | null>>([null]);
  const [open, setOpen] = useState<number | null>(null);
  const after = cursors[cursors.length - 1] ?? null;

  const transcripts = useFetched(
    simulationId === null
      ? null
      : (signal) =>
          answer(client.api.GET("/api/agents/{agent_id}/transcripts", { params: { path: { agent_id: agentId }, query: agentTranscriptQuery(simulationId, after, PAGE_SIZE) }, signal }))
            .then((result) => result as TranscriptPage)
            .then((result) => ({ items: result.items, next: cursorOf(result.next_after) })),
    [client, agentId, simulationId, after],
    { failure: "Could not load the transcripts", onUnauthorized, clearOnReload: true },
  );
  const page = transcripts.data;
  const error = simulationsError ?? transcripts.error;

  return (
    <section aria-labelledby="agent-transcripts-heading" data-testid="agent-transcripts">
      <h2 id="agent-transcripts-heading">Transcripts</h2>
      {simulations !== null && simulations.length === 0 && <p className="empty">
          No simulation has played on this agent's population yet. <LaunchOn populationId={populationId} />
        </p>}
      {simulations !== null && simulations.length > 0 && (
        <div className="filters">
          <div>
            <label htmlFor="agent-transcripts-simulation">Simulation</label>
            <select
              id="agent-transcripts-simulation"
              value={simulationId === null ? "" : String(simulationId)}
              onChange={(e) => {
                pick(Number(e.target.value));
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
      <ErrorAlert message={error} />
      {simulationId !== null && !page && error === null && <p className="empty">Loading transcripts…</p>}
      {page && page.items.length === 0 && <p className="empty">This agent has no kept rounds in simulation {simulationId}.</p>}
      {page && page.items.length > 0 && (
        <TableScroll label="Agent transcripts">
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
                <TranscriptRow
                  key={t.round}
                  transcript={t}
                  label={`Round ${t.round}`}
                  columns={5}
                  expanded={open === t.round}
                  onToggle={() => setOpen(open === t.round ? null : t.round)}
                />
              ))}
            </tbody>
          </table>
        </TableScroll>
      )}
      <CursorPager label="Agent transcript pages" cursors={cursors} next={page?.next} onCursors={setCursors} />
    </section>
  );
}
