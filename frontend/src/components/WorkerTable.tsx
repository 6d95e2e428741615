import { memo } from "react";
import type { Worker } from "../api/types";
import { formatBytes, formatPercent } from "../format";
import { isDrained, isLate, isRemoved, takesAgents } from "../state/workers";
import { Link } from "./Link";
import { RelativeTime, useNow } from "./RelativeTime";
import { StateBadge } from "./StateBadge";

export type WorkerAction = "drain" | "undrain" | "removeAgents" | "remove";

type Cadence = { ttl_s: number; heartbeat_interval_s: number | null } | null;

/** The worker's state, or "late" while it is silent past its TTL and the manager has not yet
 * marked it offline (re-rendered each second, alone: the row is memoized). */
function LivenessBadge({ worker, cadence }: { worker: Worker; cadence: Cadence }) {
  const late = isLate(worker, useNow(), cadence);
  if (!late) return <StateBadge state={worker.state} />;
  const ttl = worker.ttl_s ?? cadence?.ttl_s;
  return (
    <span title={`No heartbeat for longer than the TTL (${ttl} s): the manager marks it offline if none comes`} data-late="true">
      <StateBadge state="late" />
    </span>
  );
}

interface RowProps {
  worker: Worker;
  cadence: Cadence;
  /** Absent for a read-only viewer: the row has no actions. */
  onAction?: (worker: Worker, action: WorkerAction) => void;
}

const WorkerRow = memo(function WorkerRow({ worker, cadence, onAction }: RowProps) {
  const gone = isRemoved(worker.state);
  return (
    <tr aria-label={worker.address} data-worker-id={worker.id} data-address={worker.address} data-state={worker.state}>
      <td className="num">
        <Link href={`/workers/${worker.id}`} aria-label={`Worker ${worker.id}`}>
          {worker.id}
        </Link>
      </td>
      <td>
        {worker.node}
        {worker.slot !== null && worker.slot !== undefined && <span className="slot"> / {worker.slot}</span>}
        {worker.labels && Object.keys(worker.labels).length > 0 && (
          <div className="muted labels">
            {Object.entries(worker.labels)
              .map(([name, value]) => `${name}=${value}`)
              .join(", ")}
          </div>
        )}
      </td>
      <td className="mono">{worker.address}</td>
      <td>
        <LivenessBadge worker={worker} cadence={cadence} />
      </td>
      <td className="num">
        {worker.agents.toLocaleString("en-US")} / {worker.capacity.toLocaleString("en-US")}
      </td>
      <td className="num">{formatPercent(worker.cpu_percent)}</td>
      <td className="num">{formatBytes(worker.rss_bytes)}</td>
      <td>
        <RelativeTime iso={worker.last_heartbeat} />
      </td>
      {onAction && (
        <td className="actions">
          {isDrained(worker.state) ? (
            <button type="button" className="button small" onClick={() => onAction(worker, "undrain")}>
              Undrain
            </button>
          ) : (
            <button type="button" className="button small" disabled={!takesAgents(worker.state)} onClick={() => onAction(worker, "drain")}>
              Drain
            </button>
          )}
          <button type="button" className="button small" disabled={gone} onClick={() => onAction(worker, "removeAgents")}>
            Remove agents
          </button>
          <button type="button" className="button small danger-outline" disabled={gone} onClick={() => onAction(worker, "remove")}>
            Remove
          </button>
        </td>
      )}
    </tr>
  );
});

interface WorkerTableProps {
  workers: Worker[];
  /** The fleet's TTL and interval, for workers known only from events. */
  cadence?: Cadence;
  labelledBy: string;
  onAction?: (worker: Worker, action: WorkerAction) => void;
}

export function WorkerTable({ workers, cadence = null, labelledBy, onAction }: WorkerTableProps) {
  return (
    <div className="table-wrap">
      <table className="data" aria-labelledby={labelledBy}>
        <thead>
          <tr>
            <th scope="col">ID</th>
            <th scope="col">Node / slot</th>
            <th scope="col">Address</th>
            <th scope="col">State</th>
            <th scope="col">Agents / capacity</th>
            <th scope="col">CPU</th>
            <th scope="col">Memory</th>
            <th scope="col">Last heartbeat</th>
            {onAction && <th scope="col">Actions</th>}
          </tr>
        </thead>
        <tbody>
          {workers.map((w) => (
            <WorkerRow key={w.id} worker={w} cadence={cadence} onAction={onAction} />
          ))}
        </tbody>
      </table>
    </div>
  );
}
