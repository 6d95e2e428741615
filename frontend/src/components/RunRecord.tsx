import { useState } from "react";
import { type ApiClient, type ApiError, errorMessage, isUnauthorized } from "../api/client";
import { answer } from "../api/typedApi";
import type { SimulationDetail } from "../api/types";
import { Link } from "./Link";
import { saveText } from "./saveFile";

/**
 * The reproducibility record: the populace version, where the agents played (worker, node,
 * agents), and each endpoint's model ids as its /v1/models listed them; downloadable as the
 * manager's JSON (GET /api/simulations/{id}/record).
 */
export function RunRecord({ client, simulation, onUnauthorized }: { client: ApiClient; simulation: SimulationDetail; onUnauthorized: (err: ApiError) => void }) {
  const record = simulation.record ?? {};
  const [status, setStatus] = useState<{ ok: boolean; text: string } | null>(null);
  const placement = record.placement ?? [];
  const endpoints = record.endpoints ?? [];

  async function download() {
    setStatus(null);
    try {
      const body = await answer(client.api.GET("/api/simulations/{simulation_id}/record", { params: { path: { simulation_id: simulation.id } } }));
      const filename = `simulation-${simulation.id}-record.json`;
      saveText(`${JSON.stringify(body, null, 2)}\n`, filename, "application/json");
      setStatus({ ok: true, text: `Downloaded ${filename}` });
    } catch (err) {
      if (isUnauthorized(err)) onUnauthorized(err);
      setStatus({ ok: false, text: `Could not download the record: ${errorMessage(err)}` });
    }
  }

  return (
    <section aria-labelledby="record-heading" data-testid="run-record">
      <div className="section-title">
        <h2 id="record-heading">Reproducibility record</h2>
        <button type="button" className="button plain small push-right" onClick={() => void download()}>
          Download record
        </button>
      </div>
      <dl className="facts">
        <dt>populace version</dt>
        <dd className="mono">{record.populace_version ?? simulation.version}</dd>
        <dt>Seed</dt>
        <dd className="mono">{simulation.seed}</dd>
        {record.rerun_of !== null && record.rerun_of !== undefined && (
          <>
            <dt>Re-run of</dt>
            <dd>
              <Link href={`/simulations/${record.rerun_of}`}>Simulation {record.rerun_of}</Link>
            </dd>
          </>
        )}
        {simulation.sweep_id !== null && simulation.sweep_id !== undefined && (
          <>
            <dt>Sweep</dt>
            <dd>
              Sweep {simulation.sweep_id}
              {simulation.sweep_params && <span className="muted mono"> {JSON.stringify(simulation.sweep_params)}</span>}
            </dd>
          </>
        )}
      </dl>
      {endpoints.length > 0 && (
        <div className="table-wrap">
          <table className="data" aria-label="Endpoint models">
            <thead>
              <tr>
                <th scope="col">Endpoint</th>
                <th scope="col">Model asked for</th>
                <th scope="col">Models it served (/v1/models)</th>
              </tr>
            </thead>
            <tbody>
              {endpoints.map((e) => (
                <tr key={`${e.model}@${e.base_url}`}>
                  <td className="mono">{e.base_url}</td>
                  <td className="mono">{e.model}</td>
                  <td className="mono">{e.served_models.join(", ") || "–"}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {placement.length > 0 && (
        <div className="table-wrap narrow">
          <table className="data" aria-label="Placement">
            <thead>
              <tr>
                <th scope="col">Worker</th>
                <th scope="col">Node</th>
                <th scope="col">Address</th>
                <th scope="col">Agents</th>
              </tr>
            </thead>
            <tbody>
              {placement.map((p) => (
                <tr key={p.worker_id}>
                  <td className="num">{p.worker_id}</td>
                  <td>{p.node}</td>
                  <td className="mono">{p.address}</td>
                  <td className="num">{p.agents.toLocaleString("en-US")}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {endpoints.length === 0 && placement.length === 0 && <p className="empty">This run's record holds no placement or endpoint models (an older run, or not started yet).</p>}
      <p className={status?.ok === false ? "alert" : "muted"} role="status" aria-label="Record download result">
        {status?.text ?? ""}
      </p>
    </section>
  );
}
