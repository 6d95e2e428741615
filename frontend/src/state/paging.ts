/**
 * Client-side pages of a list held in memory (populations, simulations), with the page number
 * kept in the URL (`?page=3`, counted from 1) so a reload or a shared link shows the same rows.
 */

export const ROWS_PER_PAGE = 50;

/** The page a `?page=` value names: 1 for anything absent, malformed or below 1. */
export function parsePage(raw: string | null): number {
  const page = Number(raw);
  return Number.isInteger(page) && page >= 1 ? page : 1;
}

/** The rows [start, end) of `page`, clamped to the last page when the list shrank. */
export function pageRows(total: number, page: number, perPage = ROWS_PER_PAGE): { page: number; pages: number; start: number; end: number } {
  const pages = Math.max(1, Math.ceil(total / perPage));
  const shown = Math.min(Math.max(1, page), pages);
  const start = (shown - 1) * perPage;
  return { page: shown, pages, start, end: Math.min(total, start + perPage) };
}

/** The `?page=` value for a page: none for the first (the plain URL is page 1). */
export function pageParam(page: number): string | null {
  return page > 1 ? String(page) : null;
}
