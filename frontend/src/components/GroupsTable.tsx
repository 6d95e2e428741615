import type { GroupRow } from "../api/types";
import { type MetricDeclaration, formatMetric } from "../state/metrics";
import { hasLabels } from "../state/groups";
import { TableScroll } from "./TableScroll";

interface GroupsTableProps {
  /** One page of groups. */
  items: readonly GroupRow[];
  /** One column per kept metric, in order. */
  columns: readonly MetricDeclaration[];
  /** The group whose rounds are shown below the table, if any. */
  selected: number | null;
  onSelect: (group: number | null) => void;
  /** The heading that names the table. */
  labelledBy: string;
}

/** A page of groups: each group's number (which opens its rounds), its label, its values. */
export function GroupsTable({ items, columns, selected, onSelect, labelledBy }: GroupsTableProps) {
  const labelled = hasLabels(items);
  return (
    <TableScroll label="Groups table">
      <table className="data" aria-labelledby={labelledBy} data-testid="groups-table">
        <thead>
          <tr>
            <th scope="col">Group</th>
            {labelled && <th scope="col">Label</th>}
            {columns.map((metric) => (
              <th key={metric.name} scope="col" className="num" title={metric.description || undefined} data-metric={metric.name}>
                {metric.title}
                {metric.unit.trim() && <span className="muted"> ({metric.unit.trim()})</span>}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {items.map((g) => {
            const chosen = g.group === selected;
            return (
              <tr key={g.group} aria-label={`Group ${g.group}`} data-group={g.group} className={chosen ? "chosen-round" : undefined}>
                <td>
                  {/* Pressed: its rounds are open below; pressed again, they close. */}
                  <button
                    type="button"
                    className="button plain small"
                    aria-pressed={chosen}
                    aria-label={`Group ${g.group} over the rounds`}
                    onClick={() => onSelect(chosen ? null : g.group)}
                  >
                    {g.group}
                  </button>
                </td>
                {labelled && <td>{g.label ?? "–"}</td>}
                {columns.map((metric) => {
                  const value = g.values[metric.name];
                  return (
                    <td key={metric.name} className="num" data-metric={metric.name} data-value={value ?? ""}>
                      {formatMetric(value, metric)}
                    </td>
                  );
                })}
              </tr>
            );
          })}
        </tbody>
      </table>
    </TableScroll>
  );
}
