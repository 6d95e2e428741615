import type { WorkerState } from "../api/types";

/** The state name as plain text (tests match it exactly), colored by state. */
export function StateBadge({ state }: { state: WorkerState }) {
  return <span className={`badge badge-${state}`}>{state}</span>;
}
