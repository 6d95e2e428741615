import { memo } from "react";
import type { Worker } from "../api/types";
import { formatBytes, formatPercent } from "../format";
import { RelativeTime } from "./RelativeTime";
import { StateBadge } from "./StateBadge";

const WorkerRow = memo(function WorkerRow({ worker }: { worker: Worker }) {
  return (
    <tr aria-label={worker.address} data-worker-id={worker.id} data-address={worker.address} data-state={worker.state}>
      <td className="num">{worker.id}</td>
      <td>{worker.node}</td>
      <td className="mono">{worker.address}</td>
      <td>
        <StateBadge state={worker.state} />
      </td>
      <td className="num">
        {worker.agents} / {worker.capacity}
      </td>
      <td className="num">{formatPercent(worker.cpu_percent)}</td>
      <td className="num">{formatBytes(worker.rss_bytes)}</td>
      <td>
        <RelativeTime iso={worker.last_heartbeat} />
      </td>
    </tr>
  );
});

export function WorkerTable({ workers, labelledBy }: { workers: Worker[]; labelledBy: string }) {
  return (
    <div className="table-wrap">
      <table className="data" aria-labelledby={labelledBy}>
        <thead>
          <tr>
            <th scope="col">ID</th>
            <th scope="col">Node</th>
            <th scope="col">Address</th>
            <th scope="col">State</th>
            <th scope="col">Agents / capacity</th>
            <th scope="col">CPU</th>
            <th scope="col">Memory</th>
            <th scope="col">Last heartbeat</th>
          </tr>
        </thead>
        <tbody>
          {workers.map((w) => (
            <WorkerRow key={w.id} worker={w} />
          ))}
        </tbody>
      </table>
    </div>
  );
}
