import { useEffect, useId, useRef, useState } from "react";
import { ariaSort, nextSort, RUN_COLUMNS, type RunColumn, type RunSort } from "../state/runsTable";

/**
 * The runs table's header cells that sort it, and its "Columns" chooser: the run's own columns
 * to show, and its params and final metrics to add.
 */

/** A column header that sorts the table by `sortKey` when clicked; `aria-sort` says how it is sorted. */
export function SortableHeader({
  label,
  sortKey,
  sort,
  onSort,
  className,
  title,
}: {
  label: string;
  sortKey: string | null;
  sort: RunSort;
  onSort: (sort: RunSort) => void;
  className?: string;
  title?: string;
}) {
  if (sortKey === null) {
    return (
      <th scope="col" className={className} title={title}>
        {label}
      </th>
    );
  }
  const state = ariaSort(sort, sortKey);
  return (
    <th scope="col" className={className} aria-sort={state} title={title}>
      <button type="button" className="sort-button" onClick={() => onSort(nextSort(sort, sortKey))}>
        {label}
        <span className="sort-mark" aria-hidden="true">
          {state === "ascending" ? "▲" : state === "descending" ? "▼" : "↕"}
        </span>
      </button>
    </th>
  );
}

export interface ColumnsChoice {
  hidden: readonly RunColumn[];
  params: readonly string[];
  metrics: readonly string[];
}

/** "Columns": a panel of checkboxes, the run's own columns, then its params and final metrics. */
export function ColumnsChooser({
  chosen,
  params,
  metrics,
  metricTitle,
  onToggleColumn,
  onToggleParam,
  onToggleMetric,
}: {
  chosen: ColumnsChoice;
  /** The params and metrics the loaded runs have (plus any the URL names). */
  params: readonly string[];
  metrics: readonly string[];
  metricTitle: (name: string) => string;
  onToggleColumn: (column: RunColumn) => void;
  onToggleParam: (path: string) => void;
  onToggleMetric: (name: string) => void;
}) {
  const [open, setOpen] = useState(false);
  const panelId = useId();
  const root = useRef<HTMLDivElement>(null);
  const added = chosen.params.length + chosen.metrics.length;

  useEffect(() => {
    if (!open) return;
    const onKey = (e: KeyboardEvent) => {
      if (e.key === "Escape") setOpen(false);
    };
    const onClick = (e: MouseEvent) => {
      if (root.current && !root.current.contains(e.target as Node)) setOpen(false);
    };
    document.addEventListener("keydown", onKey);
    document.addEventListener("mousedown", onClick);
    return () => {
      document.removeEventListener("keydown", onKey);
      document.removeEventListener("mousedown", onClick);
    };
  }, [open]);

  return (
    <div className="columns-chooser" ref={root}>
      <button type="button" className="button plain" aria-expanded={open} aria-controls={panelId} onClick={() => setOpen((o) => !o)}>
        Columns{added > 0 ? ` (+${added})` : ""}
      </button>
      {open && (
        <div id={panelId} className="columns-panel" role="group" aria-label="Choose columns">
          <fieldset>
            <legend>Run</legend>
            {RUN_COLUMNS.map((c) => (
              <label key={c.id}>
                <input type="checkbox" checked={!chosen.hidden.includes(c.id)} onChange={() => onToggleColumn(c.id)} /> {c.label}
              </label>
            ))}
          </fieldset>
          <fieldset>
            <legend>Params</legend>
            {params.length === 0 && <p className="muted">No params in the runs listed.</p>}
            {params.map((path) => (
              <label key={path} title={`plugin.params.${path}`}>
                <input type="checkbox" checked={chosen.params.includes(path)} onChange={() => onToggleParam(path)} /> <code>{path}</code>
              </label>
            ))}
          </fieldset>
          <fieldset>
            <legend>Final metrics</legend>
            {metrics.length === 0 && <p className="muted">No run listed has a kept round yet.</p>}
            {[...metrics].sort((a, b) => metricTitle(a).localeCompare(metricTitle(b))).map((name) => (
              <label key={name} title={`${name}: its value in the run's last kept round`}>
                <input type="checkbox" checked={chosen.metrics.includes(name)} onChange={() => onToggleMetric(name)} /> {metricTitle(name)}
              </label>
            ))}
          </fieldset>
        </div>
      )}
    </div>
  );
}
