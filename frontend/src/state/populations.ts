import type { EventMessage, Population, PopulationProgress, PopulationStatus } from "../api/types";
import { POPULATION_PLAYABLE } from "../generated/rules";

/**
 * Deploy and clean-up progress from `population.progress` events, and the live population
 * list they keep current. Pure, so the stage arithmetic and event rules are unit-tested.
 */

// The deploy pipeline's stages in order, with the share of the whole each one ends at:
// sampling is quick, writing rows and streaming agents to workers take the time. The CLI's
// bar uses the same spans (backend/cli_population.py DEPLOY_SPANS).
const DEPLOY_STAGES: ReadonlyArray<{ stage: string; from: number; to: number; label: string }> = [
  { stage: "sampled", from: 0, to: 0.05, label: "Sampled attributes" },
  { stage: "personas", from: 0.05, to: 0.25, label: "Writing personas" },
  { stage: "persisted", from: 0.25, to: 0.6, label: "Storing agents" },
  { stage: "created", from: 0.6, to: 1, label: "Creating agents on workers" },
];

/** Stages that end a deploy or a delete, and the status they leave the population in. */
const FINAL_STAGES: Readonly<Record<string, PopulationStatus>> = {
  deployed: "deployed",
  failed: "failed",
  deleting: "deleting",
  deleted: "deleted",
};

export interface ProgressView {
  /** What is happening, for people: "42 % · Storing agents: 50,000 of 100,000 (step 3 of 4)".
   * A deploy's text leads with the percent the bar shows: a stage's own counts ("50,000 of
   * 50,000" personas) next to a bar at 25 % read as a contradiction. */
  label: string;
  /** 0..1 over the whole deploy, or null when there is no measure (deleting). */
  fraction: number | null;
}

export function isPopulationProgress(event: EventMessage): event is EventMessage & { payload: PopulationProgress } {
  const p = event.payload as Partial<PopulationProgress> | undefined;
  return event.type === "population.progress" && !!p && typeof p.population_id === "number" && typeof p.stage === "string";
}

export function progressView(p: PopulationProgress): ProgressView {
  const deploy = DEPLOY_STAGES.find((s) => s.stage === p.stage);
  if (deploy) {
    const total = p.total ?? 0;
    const done = Math.min(p.done ?? 0, total);
    const within = total > 0 ? done / total : 1;
    const counts = total > 0 ? `: ${done.toLocaleString("en-US")} of ${total.toLocaleString("en-US")}` : "";
    const fraction = deploy.from + (deploy.to - deploy.from) * within;
    const step = `step ${DEPLOY_STAGES.indexOf(deploy) + 1} of ${DEPLOY_STAGES.length}`;
    return { label: `${percentText(fraction)} · ${deploy.label}${counts} (${step})`, fraction };
  }
  switch (p.stage) {
    case "deployed":
      return { label: "Deployed", fraction: 1 };
    case "failed":
      return { label: `Failed: ${p.error ?? "unknown error"}`, fraction: null };
    case "deleting":
      return { label: "Removing agents from workers and the store", fraction: null };
    case "deleted":
      return { label: cleanupSummary(p), fraction: null };
    case "worker_cleaned": {
      const taken = `${count(p.agents ?? 0)} agents taken off worker ${p.worker_id}`;
      if (p.moved === undefined) return { label: taken, fraction: null };
      const unplaced = p.unplaced ? `, ${count(p.unplaced)} found no room` : "";
      return { label: `${taken}: ${count(p.moved)} moved to other workers${unplaced}`, fraction: null };
    }
    case "repaired":
      return { label: repairedSummary(p), fraction: null };
    case "replacing": {
      const total = p.total ?? 0;
      const done = Math.min(p.done ?? 0, total);
      return {
        label: `Re-placing agents on online workers: ${count(done)} of ${count(total)}`,
        fraction: total > 0 ? done / total : null,
      };
    }
    case "restored":
      return { label: `${count(p.done ?? 0)} agents restored on worker ${p.worker_id}`, fraction: null };
    case "worker_orphaned":
      return {
        label: `${(p.agents ?? 0).toLocaleString("en-US")} agents on offline worker ${p.worker_id} left for the reaper`,
        fraction: null,
      };
    default:
      return { label: p.stage, fraction: null };
  }
}

/** A bar's fraction as its text shows it: floored, so "100 %" only when it is full. */
export function percentText(fraction: number): string {
  return `${Math.floor(Math.min(1, Math.max(0, fraction)) * 100)} %`;
}

function count(n: number): string {
  return n.toLocaleString("en-US");
}

/** "600 of 1,000 agents hosted" */
export function hostedText(p: Pick<Population, "hosted" | "size">): string {
  return `${count(p.hosted)} of ${count(p.size)} agents hosted`;
}

/** Its status as people should read it: a degraded population says how much of it is hosted. */
export function statusText(p: Pick<Population, "status" | "hosted" | "size">): string {
  return p.status === "degraded" ? `degraded: ${hostedText(p)}` : p.status;
}

/** An entry of the launch form's population picker: the name first, the id secondary, and
 * hosted vs size when degraded ("education-study — 48,000 of 50,000 agents hosted, degraded (#3)"). */
export function populationChoice(p: Pick<Population, "id" | "name" | "status" | "hosted" | "size">): string {
  const what = p.status === "degraded" ? `${hostedText(p)}, degraded` : `${count(p.size)} agents`;
  return `${p.name} — ${what} (#${p.id})`;
}

/** Only a deployed or degraded population plays simulations and can be repaired. */
export function isPlayable(status: PopulationStatus): boolean {
  return (POPULATION_PLAYABLE as readonly string[]).includes(status);
}

/** What a repair left: the population as the manager answered it. */
export function repairOutcome(p: Pick<Population, "id" | "status" | "hosted" | "size">): { ok: boolean; text: string } {
  if (p.status === "deployed") return { ok: true, text: `Repaired: all ${count(p.size)} agents are hosted by live workers.` };
  if (p.status === "degraded") {
    const missing = Math.max(0, p.size - p.hosted);
    return {
      ok: false,
      text:
        `Still degraded: ${hostedText(p)}. No online worker has room for the other ${count(missing)}; ` +
        "add workers (or free capacity) and repair again.",
    };
  }
  return { ok: false, text: `Population ${p.id} is ${p.status}.` };
}

/** "Repaired: 400 re-placed, 0 restored; 1,000 of 1,000 agents hosted" */
export function repairedSummary(p: PopulationProgress): string {
  const unplaced = p.unplaced ? `, ${count(p.unplaced)} found no room` : "";
  const hosting = p.hosted !== undefined && p.size !== undefined ? `; ${hostedText({ hosted: p.hosted, size: p.size })}` : "";
  return `Repaired: ${count(p.replaced ?? 0)} re-placed, ${count(p.restored ?? 0)} restored${unplaced}${hosting}`;
}

/** "Deleted: agents removed from 2 workers; 1 worker was offline (its agents are removed when it is back)". */
export function cleanupSummary(p: PopulationProgress): string {
  const cleaned = p.workers_cleaned ?? 0;
  const orphaned = p.workers_orphaned ?? 0;
  const workers = (n: number) => `${n} worker${n === 1 ? "" : "s"}`;
  let text = `Deleted: agents removed from ${workers(cleaned)}`;
  if (orphaned > 0) {
    text += `; ${workers(orphaned)} offline (${orphaned === 1 ? "its" : "their"} agents are removed when back)`;
  }
  return text;
}

/** The population after a progress event: its status, how many agents are hosted, why it failed. */
export function populationAfter<P extends Pick<Population, "status" | "hosted" | "size" | "error">>(current: P, p: PopulationProgress): P {
  let next: P = current;
  if (p.stage === "repaired") {
    if (p.status && p.status !== current.status) next = { ...next, status: p.status };
    if (typeof p.hosted === "number" && p.hosted !== current.hosted) next = { ...next, hosted: p.hosted };
    return next;
  }
  const status = statusAfter(p.stage);
  if (status && status !== current.status) {
    next = { ...next, status, error: p.stage === "failed" ? (p.error ?? null) : current.error };
  }
  if (p.stage === "deployed" && next.hosted !== next.size) next = { ...next, hosted: p.total ?? next.size };
  return next;
}

/** The status a progress stage implies, or null when it does not change the status. */
export function statusAfter(stage: string): PopulationStatus | null {
  if (stage in FINAL_STAGES) return FINAL_STAGES[stage] ?? null;
  return DEPLOY_STAGES.some((s) => s.stage === stage) ? "deploying" : null;
}

export interface PopulationsState {
  byId: ReadonlyMap<number, Population>;
  /** The latest progress of each population that reported any since the page opened. */
  progress: ReadonlyMap<number, PopulationProgress>;
  /** An event named a population the list does not have (created elsewhere): refetch. */
  stale: boolean;
  loaded: boolean;
}

export type PopulationsAction =
  | { type: "events"; events: EventMessage[] }
  | { type: "loaded"; populations: Population[] }
  | { type: "upsert"; population: Population };

export const initialPopulationsState: PopulationsState = { byId: new Map(), progress: new Map(), stale: false, loaded: false };

export function populationsReducer(state: PopulationsState, action: PopulationsAction): PopulationsState {
  switch (action.type) {
    case "loaded":
      // The list is the truth now; progress of populations still in flight stays for their bars.
      return { ...state, byId: new Map(action.populations.map((p) => [p.id, p] as const)), stale: false, loaded: true };
    case "upsert": {
      const byId = new Map(state.byId);
      byId.set(action.population.id, action.population);
      return { ...state, byId };
    }
    case "events": {
      let byId: Map<number, Population> | null = null;
      let progress: Map<number, PopulationProgress> | null = null;
      let stale = state.stale;
      for (const event of action.events) {
        if (!isPopulationProgress(event)) continue;
        const p = event.payload;
        progress ??= new Map(state.progress);
        progress.set(p.population_id, p);
        const current = (byId ?? state.byId).get(p.population_id);
        if (!current) {
          stale = true;
          continue;
        }
        const next = populationAfter(current, p);
        if (next !== current) {
          byId ??= new Map(state.byId);
          byId.set(p.population_id, next);
        }
      }
      if (!byId && !progress && stale === state.stale) return state;
      return { ...state, byId: byId ?? state.byId, progress: progress ?? state.progress, stale };
    }
  }
}

/** Newest first, as people look for the one they just made. */
export function sortedPopulations(byId: ReadonlyMap<number, Population>): Population[] {
  return [...byId.values()].sort((a, b) => b.id - a.id);
}

/**
 * Agents per worker, by worker id, with the agents placed on no worker (the manager's key for
 * them is "None" or "null") last, as `worker: null`.
 */
export function placementRows(agentsPerWorker: Record<string, number>): Array<{ worker: number | null; agents: number }> {
  const rows = Object.entries(agentsPerWorker).map(([key, agents]) => {
    const id = /^\d+$/.test(key) ? Number(key) : null;
    return { worker: id, agents };
  });
  const unplaced = rows.filter((r) => r.worker === null).reduce((sum, r) => sum + r.agents, 0);
  const placed = rows.filter((r) => r.worker !== null).sort((a, b) => (a.worker as number) - (b.worker as number));
  return unplaced > 0 ? [...placed, { worker: null, agents: unplaced }] : placed;
}

/** Category bars of one distribution: each category's share of the population, largest first. */
export function categoryBars(counts: Record<string, number>): Array<{ name: string; count: number; share: number }> {
  const total = Object.values(counts).reduce((sum, n) => sum + n, 0);
  return Object.entries(counts)
    .map(([name, count]) => ({ name, count, share: total > 0 ? count / total : 0 }))
    .sort((a, b) => b.count - a.count || a.name.localeCompare(b.name));
}
