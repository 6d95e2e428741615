/** A worker's state or a population's status as plain text (tests match it exactly), colored by value. */
export function StateBadge({ state }: { state: string }) {
  return <span className={`badge badge-${state}`}>{state}</span>;
}
