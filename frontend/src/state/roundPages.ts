import type { SimulationRound } from "../api/types";

/**
 * The rounds table of a long run, a page at a time, keyed like the rounds endpoint: `after`
 * is the last round number before the page (null for the first page), so a page stays put
 * while new rounds arrive live. Pure.
 */

export const ROUNDS_PAGE_SIZE = 50;

export interface RoundsPage {
  items: SimulationRound[];
  /** The `after` of the page before (null: this is the first page; undefined: there is none). */
  previous: number | null | undefined;
  /** The `after` of the page after this one; null on the last page. */
  next: number | null;
  /** 1-based position, for "rounds 51–100 of 230". */
  first: number;
  total: number;
}

/** `rounds` sorted by number; `after` is a round number (or null for the start). */
export function roundsPage(rounds: readonly SimulationRound[], after: number | null, limit = ROUNDS_PAGE_SIZE): RoundsPage {
  const start = after === null ? 0 : firstAfter(rounds, after);
  const items = rounds.slice(start, start + limit);
  const end = start + items.length;
  const next = end < rounds.length && items.length > 0 ? (items[items.length - 1]?.round ?? null) : null;
  let previous: number | null | undefined;
  if (start > 0) {
    const previousStart = Math.max(0, start - limit);
    previous = previousStart === 0 ? null : (rounds[previousStart - 1]?.round ?? null);
  }
  return { items, previous, next, first: start + 1, total: rounds.length };
}

/** Index of the first round numbered above `after` (binary search: rounds are sorted). */
function firstAfter(rounds: readonly SimulationRound[], after: number): number {
  let lo = 0;
  let hi = rounds.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((rounds[mid]?.round ?? Infinity) <= after) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The `after` of the page holding `round` (to open the table where a chosen round is). */
export function pageHolding(rounds: readonly SimulationRound[], round: number, limit = ROUNDS_PAGE_SIZE): number | null {
  const index = firstAfter(rounds, round - 1);
  const start = Math.floor(index / limit) * limit;
  return start === 0 ? null : (rounds[start - 1]?.round ?? null);
}

/** `?rounds_after=` as a round number, null when absent or not one. */
export function parseAfter(text: string | null): number | null {
  return text !== null && /^\d+$/.test(text) ? Number(text) : null;
}
