import type {
  EventMessage,
  RoundProgress,
  Simulation,
  SimulationDetail,
  SimulationRound,
  SimulationStatus,
  SimulationUpdate,
  StoredSimulationConfig,
} from "../api/types";

/**
 * Simulations as the dashboard shows them: the game's rule and its equilibrium, the live
 * detail of one run (rounds keyed by number, so a round can never show twice), the live list,
 * and the chart series. Pure, so the rules are unit-tested.
 */

export const RULE_PRESETS = {
  "2/3": { ratio: 2 / 3, offset: 0, label: "2/3 × mean" },
  "1/2+5": { ratio: 0.5, offset: 5, label: "1/2 × mean + 5" },
  "51/100": { ratio: 0.51, offset: 0, label: "51/100 × mean" },
} as const;
export type RulePreset = keyof typeof RULE_PRESETS;

export interface Rule {
  ratio: number;
  offset: number;
  min: number;
  max: number;
}

export function resolveRule(rule: StoredSimulationConfig["rule"] | undefined): Rule {
  const min = rule?.min ?? 0;
  const max = rule?.max ?? 100;
  const preset = rule?.preset ? RULE_PRESETS[rule.preset as RulePreset] : undefined;
  if (preset) return { ratio: preset.ratio, offset: preset.offset, min, max };
  return { ratio: rule?.ratio ?? 2 / 3, offset: rule?.offset ?? 0, min, max };
}

/**
 * The Nash equilibrium of target = ratio·mean + offset over [min, max]: the fixed point
 * offset / (1 − ratio), clipped to the range. With ratio ≥ 1 there is no single one (null).
 */
export function equilibrium(rule: Rule): number | null {
  if (rule.ratio >= 1) return null;
  const point = rule.offset / (1 - rule.ratio);
  return Math.min(rule.max, Math.max(rule.min, point));
}

/** "target = 1/2 × mean + 5 on [0, 100]" */
export function describeRule(rule: Rule): string {
  const preset = Object.values(RULE_PRESETS).find((p) => Math.abs(p.ratio - rule.ratio) < 1e-12 && p.offset === rule.offset);
  const formula = preset ? preset.label : `${formatNumber(rule.ratio)} × mean${rule.offset ? ` ${rule.offset > 0 ? "+" : "−"} ${formatNumber(Math.abs(rule.offset))}` : ""}`;
  return `target = ${formula} on [${formatNumber(rule.min)}, ${formatNumber(rule.max)}]`;
}

export function formatNumber(value: number | null | undefined, digits = 2): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return "–";
  return Number.isInteger(value) ? value.toLocaleString("en-US") : value.toLocaleString("en-US", { maximumFractionDigits: digits });
}

// --- one simulation, live -------------------------------------------------------------------

const STATUS_RANK: Readonly<Record<SimulationStatus, number>> = { pending: 0, running: 1, completed: 2, failed: 2, cancelled: 2 };

export function isFinal(status: SimulationStatus): boolean {
  return STATUS_RANK[status] === 2;
}

export interface SimulationView {
  simulation: SimulationDetail | null;
  /** Rounds by number: a replayed event and a snapshot of the same round land on one entry. */
  rounds: ReadonlyMap<number, SimulationRound>;
  /** The round being played, while it is (cleared when it completes). */
  progress: RoundProgress | null;
}

export const initialSimulationView: SimulationView = { simulation: null, rounds: new Map(), progress: null };

export type SimulationAction =
  | { type: "snapshot"; simulation: SimulationDetail; rounds: SimulationRound[] }
  | { type: "events"; events: EventMessage[] }
  | { type: "updated"; simulation: Simulation };

type LiveFields = Pick<Simulation, "status" | "current_round" | "error" | "stop_reason">;

/**
 * A status only moves forward (pending → running → final) and the round count only grows: a
 * snapshot fetched before an event that was applied while the fetch was in flight must not
 * undo it.
 */
function advance<T extends LiveFields>(current: T, next: Partial<LiveFields>): T {
  const currentRound = Math.max(current.current_round, next.current_round ?? 0);
  if (!next.status || STATUS_RANK[next.status] <= STATUS_RANK[current.status]) {
    return currentRound === current.current_round ? current : { ...current, current_round: currentRound };
  }
  return {
    ...current,
    status: next.status,
    current_round: currentRound,
    error: next.error ?? current.error,
    stop_reason: next.stop_reason ?? current.stop_reason,
  };
}

export function isRoundCompleted(event: EventMessage): event is EventMessage & { payload: SimulationRound & { simulation_id: number } } {
  const p = event.payload as Partial<SimulationRound> | undefined;
  return event.type === "round.completed" && !!p && typeof p.round === "number";
}

export function isRoundProgress(event: EventMessage): event is EventMessage & { payload: RoundProgress } {
  const p = event.payload as Partial<RoundProgress> | undefined;
  return event.type === "round.progress" && !!p && typeof p.round === "number" && typeof p.answered === "number";
}

export function isSimulationUpdate(event: EventMessage): event is EventMessage & { payload: SimulationUpdate } {
  const p = event.payload as Partial<SimulationUpdate> | undefined;
  return event.type === "simulation.updated" && !!p && typeof p.simulation_id === "number" && typeof p.status === "string";
}

function roundOf(payload: SimulationRound): SimulationRound {
  const { simulation_id: _sid, rounds: _rounds, ...round } = payload as SimulationRound & { simulation_id?: number; rounds?: number };
  return round;
}

export function simulationReducer(state: SimulationView, action: SimulationAction): SimulationView {
  switch (action.type) {
    case "snapshot": {
      const rounds = new Map(state.rounds);
      for (const r of action.rounds) rounds.set(r.round, r);
      const simulation = state.simulation ? advance(action.simulation, state.simulation) : action.simulation;
      return { simulation, rounds, progress: progressAfter(state.progress, rounds, simulation) };
    }
    case "updated":
      return state.simulation ? { ...state, simulation: advance(state.simulation, action.simulation) } : state;
    case "events": {
      let rounds: Map<number, SimulationRound> | null = null;
      let simulation = state.simulation;
      let progress = state.progress;
      for (const event of action.events) {
        if (isRoundCompleted(event)) {
          rounds ??= new Map(state.rounds);
          rounds.set(event.payload.round, roundOf(event.payload));
        } else if (isRoundProgress(event)) {
          if (!progress || event.payload.round > progress.round || (event.payload.round === progress.round && event.payload.answered >= progress.answered)) {
            progress = event.payload;
          }
        } else if (isSimulationUpdate(event) && simulation) {
          const { simulation_id: _id, ...update } = event.payload;
          simulation = advance(simulation, update);
        }
      }
      const allRounds = rounds ?? state.rounds;
      progress = progressAfter(progress, allRounds, simulation);
      if (!rounds && simulation === state.simulation && progress === state.progress) return state;
      return { simulation, rounds: allRounds, progress };
    }
  }
}

/** Progress of a round that has completed, or of a run that ended, is no longer shown. */
function progressAfter(
  progress: RoundProgress | null,
  rounds: ReadonlyMap<number, SimulationRound>,
  simulation: Pick<Simulation, "status"> | null,
): RoundProgress | null {
  if (!progress) return null;
  if (rounds.has(progress.round)) return null;
  if (simulation && isFinal(simulation.status)) return null;
  return progress;
}

export function sortedRounds(rounds: ReadonlyMap<number, SimulationRound>): SimulationRound[] {
  return [...rounds.values()].sort((a, b) => a.round - b.round);
}

/** Columns for the rounds chart: x = round, then mean, target, winner and the equilibrium line. */
export function roundSeries(rounds: readonly SimulationRound[], eq: number | null): [number[], Array<number | null>, Array<number | null>, Array<number | null>, Array<number | null>] {
  return [
    rounds.map((r) => r.round),
    rounds.map((r) => r.mean),
    rounds.map((r) => r.target),
    rounds.map((r) => r.winner_value),
    rounds.map(() => eq),
  ];
}

/** Bin i of `bins` equal bins over [min, max]: its center and "[lo, hi)" label (the server bins as numpy does). */
export function histogramBins(min: number, max: number, bins: number): { centers: number[]; width: number } {
  const width = (max - min) / Math.max(1, bins);
  return { centers: Array.from({ length: bins }, (_, i) => min + (i + 0.5) * width), width };
}

export function progressText(p: RoundProgress): string {
  return `Round ${p.round} of ${p.rounds}: ${p.answered.toLocaleString("en-US")} of ${p.total.toLocaleString("en-US")} agents answered`;
}

// --- the list ------------------------------------------------------------------------------

export interface SimulationsState {
  byId: ReadonlyMap<number, Simulation>;
  progress: ReadonlyMap<number, RoundProgress>;
  /** An event named a simulation the list does not have (launched elsewhere): refetch. */
  stale: boolean;
  loaded: boolean;
}

export const initialSimulationsState: SimulationsState = { byId: new Map(), progress: new Map(), stale: false, loaded: false };

export type SimulationsAction = { type: "loaded"; simulations: Simulation[] } | { type: "events"; events: EventMessage[] };

export function simulationsReducer(state: SimulationsState, action: SimulationsAction): SimulationsState {
  if (action.type === "loaded") {
    const byId = new Map(action.simulations.map((s) => [s.id, s] as const));
    // Keep what events told us that a slower snapshot may not know yet.
    for (const [id, current] of state.byId) {
      const loaded = byId.get(id);
      if (loaded) byId.set(id, advance(loaded, current));
    }
    return { ...state, byId, stale: false, loaded: true };
  }
  let byId: Map<number, Simulation> | null = null;
  let progress: Map<number, RoundProgress> | null = null;
  let stale = state.stale;
  for (const event of action.events) {
    if (isRoundProgress(event)) {
      progress ??= new Map(state.progress);
      progress.set(event.payload.simulation_id, event.payload);
    } else if (isSimulationUpdate(event)) {
      const current = (byId ?? state.byId).get(event.payload.simulation_id);
      if (!current) {
        stale = true;
        continue;
      }
      byId ??= new Map(state.byId);
      const { simulation_id: _id, ...update } = event.payload;
      byId.set(current.id, advance(current, update));
      if (isFinal(event.payload.status)) {
        progress ??= new Map(state.progress);
        progress.delete(current.id);
      }
    } else if (isRoundCompleted(event)) {
      const sid = (event.payload as { simulation_id?: number }).simulation_id;
      if (typeof sid === "number" && (progress ?? state.progress).get(sid)?.round === event.payload.round) {
        progress ??= new Map(state.progress);
        progress.delete(sid);
      }
    }
  }
  if (!byId && !progress && stale === state.stale) return state;
  return { ...state, byId: byId ?? state.byId, progress: progress ?? state.progress, stale };
}

/** Newest first. */
export function sortedSimulations(byId: ReadonlyMap<number, Simulation>): Simulation[] {
  return [...byId.values()].sort((a, b) => b.id - a.id);
}
