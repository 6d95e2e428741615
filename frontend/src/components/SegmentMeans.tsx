import { memo } from "react";
import type { SimulationRound } from "../api/types";
import { formatNumber } from "../state/simulations";

/** Per-segment means of one round: a table per attribute the simulation breaks statistics down by. */
export const SegmentMeans = memo(function SegmentMeans({ round }: { round: SimulationRound }) {
  const attributes = Object.entries(round.segments ?? {});
  return (
    <section aria-labelledby="segments-heading">
      <h2 id="segments-heading">Means by segment, round {round.round}</h2>
      {attributes.length === 0 && <p className="empty">This simulation does not break its statistics down by an attribute.</p>}
      <div className="segment-tables">
        {attributes.map(([attribute, categories]) => {
          const rows = Object.entries(categories).sort((a, b) => (a[1].mean ?? Infinity) - (b[1].mean ?? Infinity));
          return (
            <div className="table-wrap narrow" key={attribute}>
              <table className="data" aria-label={`Means by ${attribute}`}>
                <thead>
                  <tr>
                    <th scope="col">{attribute}</th>
                    <th scope="col">Agents</th>
                    <th scope="col">Mean</th>
                    <th scope="col">Std</th>
                  </tr>
                </thead>
                <tbody>
                  {rows.map(([category, stats]) => (
                    <tr key={category} aria-label={category}>
                      <th scope="row">{category}</th>
                      <td className="num">{stats.count.toLocaleString("en-US")}</td>
                      <td className="num">{formatNumber(stats.mean)}</td>
                      <td className="num">{formatNumber(stats.std)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          );
        })}
      </div>
    </section>
  );
});
