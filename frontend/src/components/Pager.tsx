import { pageRows } from "../state/paging";

/** Previous / "51–100 of 230" / Next for a list paged in the browser. */
export function Pager({ label, total, page, perPage, onPage }: { label: string; total: number; page: number; perPage?: number; onPage: (page: number) => void }) {
  const rows = pageRows(total, page, perPage);
  if (rows.pages <= 1) return null;
  const n = (x: number) => x.toLocaleString("en-US");
  return (
    <nav className="pager" aria-label={label}>
      <button type="button" className="button plain" disabled={rows.page <= 1} onClick={() => onPage(rows.page - 1)}>
        Previous page
      </button>
      <span className="muted" data-testid="page-rows">
        {n(rows.start + 1)}–{n(rows.end)} of {n(total)}
      </span>
      <button type="button" className="button plain" disabled={rows.page >= rows.pages} onClick={() => onPage(rows.page + 1)}>
        Next page
      </button>
    </nav>
  );
}
