/**
 * Placeholders shown while a panel's data is on its way, so a page never says "no rounds" or
 * "no agents" before it knows. Screen readers hear "Loading …" once (role status, aria-busy).
 */
export function Skeleton({ label, lines = 3, chart = false }: { label: string; lines?: number; chart?: boolean }) {
  return (
    <div className="skeleton" role="status" aria-busy="true" aria-label={label} data-testid="skeleton">
      {chart ? (
        <span className="skeleton-block" aria-hidden="true" />
      ) : (
        Array.from({ length: lines }, (_, i) => <span key={i} className="skeleton-line" aria-hidden="true" style={{ width: `${92 - ((i * 17) % 35)}%` }} />)
      )}
      <span className="visually-hidden">{label}</span>
    </div>
  );
}

/** A table's body while its rows load: `rows` grey bars across `columns` cells. */
export function SkeletonRows({ columns, rows = 4 }: { columns: number; rows?: number }) {
  return (
    <>
      {Array.from({ length: rows }, (_, r) => (
        <tr key={r} className="skeleton-row" aria-hidden="true">
          {Array.from({ length: columns }, (_, c) => (
            <td key={c}>
              <span className="skeleton-line" />
            </td>
          ))}
        </tr>
      ))}
    </>
  );
}
