import type { EventMessage, TimelineEntry, TimelineKind } from "../api/types";
import { parseServerTime } from "../format";
import type { RoundTime } from "./eta";

/**
 * A run's timeline as the simulation page holds it: the stored entries (fetched a page at a
 * time) and those `timeline.added` events bring live, each once, in the order they happened,
 * bounded. Pure.
 */

/** Entries kept in the page at most (a run of 1,000 rounds has about 1,010); the oldest go first. */
export const MAX_ENTRIES = 5000;
/** Entries shown before "Show earlier". */
export const SHOWN_STEP = 50;

export interface TimelineState {
  /** Oldest first, by id, without duplicates. */
  entries: readonly TimelineEntry[];
  /** Older entries were dropped to stay within MAX_ENTRIES. */
  truncated: boolean;
}

export const emptyTimeline: TimelineState = { entries: [], truncated: false };

/** The state with `incoming` merged in (an entry seen twice, by REST and by event, counts once). */
export function addEntries(state: TimelineState, incoming: readonly TimelineEntry[], max = MAX_ENTRIES): TimelineState {
  if (incoming.length === 0) return state;
  const byId = new Map<number, TimelineEntry>();
  for (const e of state.entries) byId.set(e.id, e);
  let added = false;
  for (const e of incoming) {
    if (!byId.has(e.id)) {
      byId.set(e.id, e);
      added = true;
    }
  }
  if (!added) return state;
  const sorted = [...byId.values()].sort((a, b) => a.id - b.id);
  const over = Math.max(0, sorted.length - max);
  return { entries: over > 0 ? sorted.slice(over) : sorted, truncated: state.truncated || over > 0 };
}

function isEntry(value: unknown): value is TimelineEntry {
  const e = value as Partial<TimelineEntry> | null;
  return e !== null && typeof e === "object" && typeof e.id === "number" && typeof e.kind === "string" && typeof e.message === "string" && typeof e.time === "string";
}

/** The run's entries among a batch of events (`timeline.added` on its topic). */
export function entriesFromEvents(events: readonly EventMessage[], simulationId: number): TimelineEntry[] {
  const entries: TimelineEntry[] = [];
  for (const event of events) {
    if (event.type !== "timeline.added" || !isEntry(event.payload)) continue;
    if (event.payload.simulation_id === simulationId) entries.push(event.payload);
  }
  return entries;
}

/** The id to fetch after: the newest entry held (null: from the start). */
export function lastId(state: TimelineState): number | null {
  return state.entries.at(-1)?.id ?? null;
}

/** The newest `count` entries, newest first (how the page lists them). */
export function newestFirst(state: TimelineState, count: number): TimelineEntry[] {
  return state.entries.slice(Math.max(0, state.entries.length - count)).reverse();
}

/** When each round finished, for the run's pace (state/eta.ts). */
export function roundTimes(state: TimelineState): RoundTime[] {
  const times: RoundTime[] = [];
  for (const e of state.entries) {
    if (e.kind === "round" && e.round !== null) times.push({ round: e.round, at: parseServerTime(e.time) });
  }
  return times;
}

export type EntryTone = "good" | "bad" | "warn" | "info";

const TONES: Readonly<Record<TimelineKind, EntryTone>> = {
  launched: "info",
  started: "info",
  round: "info",
  resumed: "info",
  completed: "good",
  fault: "warn",
  paused: "warn",
  cancelled: "warn",
  failed: "bad",
};

export function entryTone(kind: string): EntryTone {
  return TONES[kind as TimelineKind] ?? "info";
}
