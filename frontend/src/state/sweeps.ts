import type { ApiClient } from "../api/client";
import { answer, yamlBody } from "../api/typedApi";
import type { EventMessage } from "../api/types";
import { SIMULATION_FINAL, type SWEEP_STATUSES } from "../generated/rules";

/**
 * Sweeps as the dashboard shows them: the list, one sweep's results table kept live from its
 * `sweep:{id}` events, and the REST calls. The reducers are pure, so the rules are unit-tested.
 */

export type SweepStatus = (typeof SWEEP_STATUSES)[number];

export interface Sweep {
  id: number;
  name: string;
  status: SweepStatus;
  mode: "sequence" | "parallel";
  runs: number;
  /** The populations its runs play on, from its sweep file (optional: a manager before it had none). */
  populations?: number[];
  error: string | null;
  created_at: string;
  finished_at: string | null;
}

export interface SweepRow {
  point: number;
  params: Record<string, unknown>;
  simulation_id: number | null;
  population_id: number | null;
  status: string | null;
  rounds: number | null;
  rounds_played: number | null;
  final_mean: number | null;
  target: number | null;
  winner_value: number | null;
  n_valid: number | null;
  prompt_tokens: number | null;
  completion_tokens: number | null;
  error: string | null;
}

export interface SweepDetail extends Sweep {
  config: Record<string, unknown>;
  grid: Record<string, unknown[]>;
  launched: number;
  finished: number;
  results: { items: SweepRow[]; next_after: number | null };
}

interface SweepPage {
  items: Sweep[];
  next_after: number | null;
}

export const FINAL_RUN_STATUSES: ReadonlySet<string> = new Set(SIMULATION_FINAL);

export const EXAMPLE_SWEEP = `name: rule-by-seed
mode: sequence            # or parallel: one run at a time per population
populations: [1]
base:
  rounds: 5
  policy: {kind: synthetic}
grid:                     # dotted paths into the simulation config; every combination runs
  rule: [{preset: "2/3"}, {preset: "1/2+5"}]
  seed: [1, 2]
`;

// --- REST ----------------------------------------------------------------------------------

export function createSweep(client: ApiClient, yamlText: string): Promise<Sweep> {
  return answer(client.api.POST("/api/sweeps", yamlBody(yamlText))) as Promise<Sweep>;
}

/** Sweeps, newest first, up to `max` (the list pages by id). */
export async function listSweeps(client: ApiClient, signal?: AbortSignal, max = 5000): Promise<Sweep[]> {
  const sweeps: Sweep[] = [];
  let after: number | null = null;
  while (sweeps.length < max) {
    const params = { query: { limit: 1000, after } };
    const page = (await answer(client.api.GET("/api/sweeps", { params, signal }))) as SweepPage;
    sweeps.push(...page.items);
    if (page.next_after === null) break;
    after = page.next_after;
  }
  return sweeps.sort((a, b) => b.id - a.id);
}

/** One sweep with every row of its results table (a sweep has at most 256 points). */
export async function fetchSweep(client: ApiClient, id: number, signal?: AbortSignal): Promise<SweepDetail> {
  let detail: SweepDetail | null = null;
  let after: number | null = null;
  for (;;) {
    const params = { path: { sweep_id: id }, query: { limit: 1000, after } };
    const page = (await answer(client.api.GET("/api/sweeps/{sweep_id}", { params, signal }))) as SweepDetail;
    detail = detail === null ? page : { ...page, results: { items: [...detail.results.items, ...page.results.items], next_after: null } };
    if (page.results.next_after === null) return detail;
    after = page.results.next_after;
  }
}

export function cancelSweep(client: ApiClient, id: number): Promise<Sweep> {
  return answer(client.api.POST("/api/sweeps/{sweep_id}/cancel", { params: { path: { sweep_id: id } } })) as Promise<Sweep>;
}

export async function deleteSweep(client: ApiClient, id: number): Promise<void> {
  await client.api.DELETE("/api/sweeps/{sweep_id}", { params: { path: { sweep_id: id } } });
}

// --- the list -------------------------------------------------------------------------------

export interface SweepsState {
  byId: Map<number, Sweep>;
  loaded: boolean;
  /** An event named a sweep the list does not hold yet: refetch. */
  stale: boolean;
}

export const initialSweepsState: SweepsState = { byId: new Map(), loaded: false, stale: false };

export type SweepsAction = { type: "loaded"; sweeps: Sweep[] } | { type: "events"; events: EventMessage[] };

export function sweepsReducer(state: SweepsState, action: SweepsAction): SweepsState {
  if (action.type === "loaded") {
    return { byId: new Map(action.sweeps.map((s) => [s.id, s])), loaded: true, stale: false };
  }
  let byId = state.byId;
  let stale = state.stale;
  for (const event of action.events) {
    const payload = event.payload ?? {};
    const id = Number(payload.sweep_id);
    if (event.type === "sweep.deleted") {
      if (byId.has(id)) {
        byId = new Map(byId);
        byId.delete(id);
      }
    } else if (event.type === "sweep.updated") {
      const known = byId.get(id);
      if (!known) {
        stale = true;
        continue;
      }
      byId = new Map(byId);
      byId.set(id, { ...known, status: payload.status as SweepStatus, error: (payload.error as string | null) ?? null });
    }
  }
  return byId === state.byId && stale === state.stale ? state : { ...state, byId, stale };
}

export function sortedSweeps(byId: Map<number, Sweep>): Sweep[] {
  return [...byId.values()].sort((a, b) => b.id - a.id);
}

// --- one sweep, live ------------------------------------------------------------------------

export interface SweepView {
  detail: SweepDetail | null;
  /** A run ended or the sweep changed: its final statistics are refetched over REST. */
  stale: boolean;
  deleted: boolean;
}

export const initialSweepView: SweepView = { detail: null, stale: false, deleted: false };

export type SweepViewAction = { type: "loaded"; detail: SweepDetail } | { type: "events"; events: EventMessage[] };

/**
 * `sweep.run` moves a row's status and round at once; a run that ends (or a sweep that
 * changes status) marks the view stale, since the final mean and target come from REST.
 */
export function sweepViewReducer(view: SweepView, action: SweepViewAction): SweepView {
  if (action.type === "loaded") return { detail: action.detail, stale: false, deleted: false };
  let { detail, stale, deleted } = view;
  for (const event of action.events) {
    const payload = event.payload ?? {};
    if (event.type === "sweep.deleted") {
      deleted = true;
    } else if (event.type === "sweep.updated") {
      if (detail) detail = { ...detail, status: payload.status as SweepStatus, error: (payload.error as string | null) ?? null };
      stale = true;
    } else if (event.type === "sweep.run" && detail) {
      const point = Number(payload.point);
      const status = String(payload.status);
      const items = detail.results.items.map((row) =>
        row.point === point
          ? {
              ...row,
              simulation_id: Number(payload.simulation_id),
              population_id: Number(payload.population_id),
              status,
              rounds: Number(payload.rounds),
              rounds_played: Number(payload.current_round),
            }
          : row,
      );
      if (!items.some((row) => row.point === point)) continue;
      detail = { ...detail, results: { ...detail.results, items } };
      if (FINAL_RUN_STATUSES.has(status)) stale = true;
    }
  }
  if (detail === view.detail && stale === view.stale && deleted === view.deleted) return view;
  return { detail, stale, deleted };
}

// --- what the pages show --------------------------------------------------------------------

/** `rule={"preset":"2/3"}, seed=1`: a point's params in one line, grid order. */
export function paramsText(params: Record<string, unknown>): string {
  return Object.entries(params)
    .map(([key, value]) => `${key}=${typeof value === "string" ? value : JSON.stringify(value)}`)
    .join(", ");
}

/** The comparison view of every run launched so far, in grid order (null with fewer than two). */
export function compareHref(rows: readonly SweepRow[]): string | null {
  const ids = rows.map((r) => r.simulation_id).filter((id): id is number => id !== null);
  return ids.length >= 2 ? `/compare?ids=${ids.join(",")}` : null;
}

/** "3 of 4 runs finished" (from the rows, so it moves with the events). */
export function progressText(detail: SweepDetail): string {
  const finished = detail.results.items.filter((r) => r.status !== null && FINAL_RUN_STATUSES.has(r.status)).length;
  const total = detail.runs;
  // Rows are paged at 1,000 but a sweep has at most 256 points, so all rows are here.
  return `${finished} of ${total} run${total === 1 ? "" : "s"} finished`;
}

export function tokensOf(row: SweepRow): number | null {
  if (row.prompt_tokens === null && row.completion_tokens === null) return null;
  return (row.prompt_tokens ?? 0) + (row.completion_tokens ?? 0);
}
