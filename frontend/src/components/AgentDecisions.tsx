import { useState } from "react";
import type { ApiClient, ApiError } from "../api/client";
import { useFetched } from "../hooks/useFetched";
import { formatNumber } from "../state/simulations";
import { CursorPager } from "./CursorPager";
import { ErrorAlert } from "./ErrorAlert";
import { Link } from "./Link";
import { LaunchOn } from "./LaunchOn";

const PAGE_SIZE = 20;

/** A decision's action as its plugin types it: a number, an option's name, yes or no. */
export function actionText(action: number | string | boolean | null | undefined): string {
  if (typeof action === "string") return action;
  if (typeof action === "boolean") return action ? "true" : "false";
  return formatNumber(action);
}

/** One agent's decisions across simulations (newest simulation first), a keyset page at a time. */
export function AgentDecisions({ client, agentId, populationId, onUnauthorized }: { client: ApiClient; agentId: number; populationId: number; onUnauthorized: (err: ApiError) => void }) {
  // cursors[i] is the `after` of page i; the last one is the page on screen.
  const [cursors, setCursors] = useState<Array<string | null>>([null]);
  const after = cursors[cursors.length - 1] ?? null;
  const { data: page, error } = useFetched(
    (signal) => client.agentDecisions(agentId, { after, limit: PAGE_SIZE, signal }).then((result) => ({ items: result.items, next: result.next_after })),
    [client, agentId, after],
    { failure: "Could not load the decisions", onUnauthorized },
  );

  return (
    <>
      <ErrorAlert message={error} />
      {page && page.items.length === 0 && cursors.length === 1 && <p className="empty">
          This agent has not played in any simulation yet. <LaunchOn populationId={populationId} />
        </p>}
      {!page && error === null && <p className="empty">Loading decisions…</p>}
      {page && page.items.length > 0 && (
        <div className="table-wrap">
          <table className="data" aria-label="Decisions">
            <thead>
              <tr>
                <th scope="col">Simulation</th>
                <th scope="col">Round</th>
                <th scope="col">Action</th>
                <th scope="col">Target</th>
                <th scope="col">Winning number</th>
                <th scope="col">Won</th>
              </tr>
            </thead>
            <tbody>
              {page.items.map((d) => (
                <tr key={`${d.simulation_id}:${d.round}`} aria-label={`Simulation ${d.simulation_id} round ${d.round}`}>
                  <td>
                    <Link href={`/simulations/${d.simulation_id}`}>{d.simulation_name}</Link>
                  </td>
                  <td className="num">{d.round}</td>
                  <td className="num">{d.status === "valid" ? actionText(d.action) : d.status}</td>
                  <td className="num">{formatNumber(d.target)}</td>
                  <td className="num">{formatNumber(d.winner_value)}</td>
                  <td>{d.won ? <span className="badge badge-online">won</span> : "–"}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <CursorPager label="Decision pages" cursors={cursors} next={page?.next} onCursors={setCursors} />
    </>
  );
}
