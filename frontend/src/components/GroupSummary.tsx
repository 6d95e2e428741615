import type { GroupRow } from "../api/types";
import type { MetricDeclaration } from "../state/metrics";
import { summarize, summaryText } from "../state/groups";

/** Each metric over the page's groups: how many have a value, and their min, mean and max. */
export function GroupSummary({ items, columns }: { items: readonly GroupRow[]; columns: readonly MetricDeclaration[] }) {
  return (
    <ul className="group-summary" aria-label="Summary of the groups shown" data-testid="group-summary">
      {columns.map((metric) => {
        const summary = summarize(items, metric.name);
        return (
          <li key={metric.name} data-metric={metric.name} data-count={summary.count}>
            <span className="metric-title">{metric.title}</span>: {summaryText(summary, metric)}
          </li>
        );
      })}
    </ul>
  );
}
