import { memo } from "react";
import type { Worker } from "../api/types";
import { formatBytes, formatPercent } from "../format";
import { RelativeTime } from "./RelativeTime";
import { StateBadge } from "./StateBadge";

export type WorkerAction = "drain" | "undrain" | "removeAgents" | "remove";

interface RowProps {
  worker: Worker;
  /** Absent for a read-only viewer: the row has no actions. */
  onAction?: (worker: Worker, action: WorkerAction) => void;
}

const WorkerRow = memo(function WorkerRow({ worker, onAction }: RowProps) {
  const gone = worker.state === "removed";
  return (
    <tr aria-label={worker.address} data-worker-id={worker.id} data-address={worker.address} data-state={worker.state}>
      <td className="num">{worker.id}</td>
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
        <StateBadge state={worker.state} />
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
          {worker.state === "draining" ? (
            <button type="button" className="button small" onClick={() => onAction(worker, "undrain")}>
              Undrain
            </button>
          ) : (
            <button type="button" className="button small" disabled={worker.state !== "online"} onClick={() => onAction(worker, "drain")}>
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
  labelledBy: string;
  onAction?: (worker: Worker, action: WorkerAction) => void;
}

export function WorkerTable({ workers, labelledBy, onAction }: WorkerTableProps) {
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
            <WorkerRow key={w.id} worker={w} onAction={onAction} />
          ))}
        </tbody>
      </table>
    </div>
  );
}
