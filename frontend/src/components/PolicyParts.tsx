import { memo } from "react";
import type { PolicyPart, SimulationRound } from "../api/types";
import { policyRows } from "../state/policyParts";
import { formatNumber } from "../state/simulations";

/** A mixed population's parts (who plays which policy) and the shown round broken down by policy; nothing for a plain policy. */
export const PolicyParts = memo(function PolicyParts({ parts, round }: { parts: readonly PolicyPart[] | undefined; round: SimulationRound | null | undefined }) {
  const rows = policyRows(parts, round?.metrics_by_policy);
  if (rows.length === 0) return null;
  const n = (x: number | null) => (x === null ? "–" : x.toLocaleString("en-US"));
  return (
    <section aria-labelledby="policy-parts-heading" data-testid="policy-parts">
      <h2 id="policy-parts-heading">By policy{round ? `, round ${round.round}` : ""}</h2>
      <div className="table-wrap narrow">
        <table className="data" aria-label="By policy">
          <thead>
            <tr>
              <th scope="col">Part</th>
              <th scope="col">Policy</th>
              <th scope="col">Who</th>
              <th scope="col">Agents</th>
              <th scope="col">Valid</th>
              <th scope="col">Not valid</th>
              <th scope="col">Mean action</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((row) => (
              <tr key={row.label} aria-label={row.label}>
                <th scope="row">{row.label}</th>
                <td>{row.kind}</td>
                <td>{row.who}</td>
                <td className="num">{n(row.agents)}</td>
                <td className="num">{n(row.valid)}</td>
                <td className="num">{n(row.invalid)}</td>
                <td className="num">{formatNumber(row.mean)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
});
