import { memo } from "react";
import { type GraphStats, degreeBins, degreeSummary, graphFacts, graphKindName } from "../state/networks";

/**
 * A population's graph (config `graph:`), as the deploy measured it: its numbers in a compact
 * definition list, and the degree distribution over log2 bins as CSS bars, the same bars the
 * distributions use (a table underneath: the text alternative screen readers get).
 */
export const GraphPanel = memo(function GraphPanel({ graph }: { graph: GraphStats }) {
  const bins = degreeBins(graph.degree_histogram);
  const maxShare = Math.max(0, ...bins.map((b) => b.share));
  const facts = graphFacts(graph);
  return (
    <section aria-labelledby="graph-heading" data-testid="graph-panel">
      <h2 id="graph-heading">Graph</h2>
      <p className="muted graph-intro">
        {graphKindName(graph.kind)} graph of {graph.nodes.toLocaleString("en-US")} agents: each agent sees its neighbours&apos; values in
        network simulations (sir, voter, bounded confidence). Open an agent to see its neighbours.
      </p>
      <div className="graph-panel">
        <dl className="facts graph-facts" aria-label="Graph statistics">
          {facts.map((fact) => (
            <div key={fact.term} className="graph-fact" title={fact.hint}>
              <dt>{fact.term}</dt>
              <dd>{fact.detail}</dd>
            </div>
          ))}
        </dl>
        <figure className="bars degree-bars" aria-labelledby="degree-heading" aria-describedby="degree-summary" data-testid="degree-distribution">
          <figcaption id="degree-heading">Degree distribution (agents per degree, log2 bins)</figcaption>
          <p id="degree-summary" className="visually-hidden">
            {degreeSummary(bins)}
          </p>
          {bins.length === 0 ? (
            <p className="empty small">
              {graph.kind === "complete"
                ? `Every agent has ${graph.max_degree.toLocaleString("en-US")} neighbours (a complete graph).`
                : "No degree distribution stored."}
            </p>
          ) : (
            <table className="bars-table" aria-labelledby="degree-heading">
              <thead className="visually-hidden">
                <tr>
                  <th scope="col">Degree</th>
                  <th scope="col">Bar</th>
                  <th scope="col">Agents</th>
                  <th scope="col">Share</th>
                </tr>
              </thead>
              <tbody>
                {bins.map((bin) => (
                  <tr key={bin.label} aria-label={`Degree ${bin.label}`} data-count={bin.count}>
                    <th scope="row">{bin.label}</th>
                    <td className="bar-cell">
                      <span className="bar" style={{ width: `${maxShare > 0 ? ((bin.share / maxShare) * 100).toFixed(2) : 0}%` }} aria-hidden="true" />
                    </td>
                    <td className="num">{bin.count.toLocaleString("en-US")}</td>
                    <td className="num muted">{(bin.share * 100).toFixed(1)} %</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </figure>
      </div>
    </section>
  );
});
