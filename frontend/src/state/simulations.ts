import type {
  EventMessage,
  RoundProgress,
  Simulation,
  SimulationDetail,
  SimulationListItem,
  SimulationRound,
  SimulationStatus,
  SimulationUpdate,
  StoredRule,
  StoredSimulationConfig,
} from "../api/types";
import { formatPercent } from "../format";
import { RULE_PRESET_RULES, SIMULATION_PLAYING, SIMULATION_RESUMABLE } from "../generated/rules";

/**
 * Simulations as the dashboard shows them: the game's rule and its equilibrium, the live
 * detail of one run (rounds keyed by number, so a round can never show twice), the live list,
 * and the chart series. Pure, so the rules are unit-tested.
 */

export type RulePreset = keyof typeof RULE_PRESET_RULES;

/** How each preset reads; a preset added in Python fails tsc here until it has one. */
const PRESET_LABELS: Record<RulePreset, string> = {
  "2/3": "2/3 × mean",
  "1/2+5": "1/2 × mean + 5",
  "51/100": "51/100 × mean",
};

/** The manager's rule presets (generated from config.PRESETS), each with its label. */
export const RULE_PRESETS = Object.fromEntries(
  (Object.keys(RULE_PRESET_RULES) as RulePreset[]).map((name) => [name, { ...RULE_PRESET_RULES[name], label: PRESET_LABELS[name] }]),
) as Record<RulePreset, { ratio: number; offset: number; label: string }>;

export interface Rule {
  ratio: number;
  offset: number;
  min: number;
  max: number;
}

/**
 * The guessing game's params of a stored config: under plugin.params since simulations are
 * plugins, at the top level in configs stored before.
 */
export function guessParams(config: Record<string, unknown> | undefined): {
  rule?: StoredRule;
  feedback?: { mean?: boolean };
} {
  const plugin = config?.plugin as StoredSimulationConfig["plugin"] | undefined;
  const params = (plugin?.name === "guess" ? plugin.params : config) ?? {};
  return { rule: params.rule as StoredRule | undefined, feedback: params.feedback as { mean?: boolean } | undefined };
}

export function resolveRule(rule: StoredRule | undefined): Rule {
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

/** Playing (or about to): rounds are in flight and progress shows. */
export function isActive(status: SimulationStatus): boolean {
  return (SIMULATION_PLAYING as readonly string[]).includes(status);
}

/** What an operator can do with a run in this status (the manager answers 409 to anything else). */
export function simulationActions(status: SimulationStatus): { pause: boolean; resume: boolean; cancel: boolean; delete: boolean } {
  const cancel = isActive(status) || status === "paused";
  return {
    pause: isActive(status),
    resume: (SIMULATION_RESUMABLE as readonly string[]).includes(status),
    cancel,
    // A finished run (completed, failed, cancelled) can be deleted; a live one is cancelled first.
    delete: !cancel,
  };
}

/** "Paused after round 3 of 10: paused by an operator" */
export function pauseText(s: Pick<Simulation, "current_round" | "rounds" | "pause_reason">): string {
  const where = s.current_round > 0 ? `after round ${s.current_round} of ${s.rounds}` : "before its first round";
  return `Paused ${where}: ${s.pause_reason ?? "no reason given"}`;
}

/** "800 agent answers counted lost over the kept rounds (no live worker hosted those agents)" */
export function lostText(lost: number): string {
  return `${lost.toLocaleString("en-US")} agent answer${lost === 1 ? "" : "s"} counted lost over the kept rounds (no live worker hosted ${lost === 1 ? "that agent" : "those agents"})`;
}

/** "2 rounds had fewer valid answers than the participation floor (80 % of the agents)" */
export function belowFloorText(s: Pick<Simulation, "rounds_below_floor" | "participation_floor">): string {
  const n = s.rounds_below_floor;
  const floor = Math.round(s.participation_floor * 100);
  return `${n.toLocaleString("en-US")} round${n === 1 ? "" : "s"} had fewer valid answers than the participation floor (${floor} % of the agents)`;
}

/** A round's participation as a percentage ("75.0 %"), or "–" when a manager did not send it. */
export function participationText(r: Pick<SimulationRound, "participation">): string {
  return r.participation == null ? "–" : formatPercent(r.participation * 100);
}

/** Whether any round lacked a valid answer from some agent (the participation column shows). */
export function anyShortfall(rounds: readonly SimulationRound[]): boolean {
  return rounds.some((r) => r.participation != null && r.participation < 1);
}

/** Prompt tokens over the rounds, and how many of them the LLM servers took from their prefix cache. */
export function promptTokenTotals(rounds: readonly SimulationRound[]): { prompt: number; cached: number } {
  let prompt = 0;
  let cached = 0;
  for (const r of rounds) {
    prompt += r.prompt_tokens ?? 0;
    cached += r.cached_prompt_tokens ?? 0;
  }
  return { prompt, cached };
}

/** {percent: "37.5 %", counts: "1,200 of 3,200"}; null when no prompt tokens were counted (no LLM, or none reported). */
export function promptCache(cached: number | undefined, prompt: number | undefined): { percent: string; counts: string } | null {
  if (!prompt || prompt <= 0) return null;
  const hits = Math.max(0, cached ?? 0);
  return { percent: formatPercent((100 * hits) / prompt), counts: `${hits.toLocaleString("en-US")} of ${prompt.toLocaleString("en-US")}` };
}

/** "37.5 % (1,200 of 3,200)"; null when no prompt tokens were counted. */
export function promptCacheText(cached: number | undefined, prompt: number | undefined): string | null {
  const shown = promptCache(cached, prompt);
  return shown && `${shown.percent} (${shown.counts})`;
}

/** Whether the rounds table needs its "From cache" column. */
export function anyPromptTokens(rounds: readonly SimulationRound[]): boolean {
  return rounds.some((r) => (r.prompt_tokens ?? 0) > 0);
}

/** Whether the rounds table needs its "Lost" column. */
/** Whether any round has a target or a winning number (the guessing game's; other plugins' rounds have neither). */
export function anyTargets(rounds: readonly SimulationRound[]): boolean {
  return rounds.some((r) => (r.target !== null && r.target !== undefined) || (r.winner_value !== null && r.winner_value !== undefined));
}

export function anyLost(rounds: readonly SimulationRound[]): boolean {
  return rounds.some((r) => (r.n_lost ?? 0) > 0);
}

export interface SimulationView {
  simulation: SimulationDetail | null;
  /** Rounds by number: a replayed event and a snapshot of the same round land on one entry. */
  rounds: ReadonlyMap<number, SimulationRound>;
  /** The round being played, while it is (cleared when it completes). */
  progress: RoundProgress | null;
  /** The last simulation.updated: its batch (see `at`) and fields; null when none came yet. */
  lastUpdate: LastUpdate | null;
}

export const initialSimulationView: SimulationView = { simulation: null, rounds: new Map(), progress: null, lastUpdate: null };

/**
 * A status goes back and forth (running ⇄ paused, failed → running on resume), so order comes
 * from the events, which arrive in the order the manager made the changes. Each events batch
 * carries `at`, a number the page increments per batch; a snapshot (a REST answer) carries
 * `since`, the number when it was asked for. A snapshot asked for before a status event was
 * applied may be older than it: that event's fields stay, and every later change comes as an
 * event too. A snapshot asked for after (a resync) is the truth.
 */
export type SimulationAction =
  | { type: "snapshot"; simulation: SimulationDetail; rounds: SimulationRound[]; since: number }
  | { type: "events"; events: EventMessage[]; at: number }
  | { type: "updated"; simulation: Simulation; since: number };

const LIVE_FIELDS = ["status", "current_round", "error", "stop_reason", "pause_reason", "lost_agents", "rounds_below_floor", "started_at", "finished_at"] as const;
type LiveFields = Pick<Simulation, (typeof LIVE_FIELDS)[number]>;

export interface LastUpdate {
  at: number;
  fields: Partial<LiveFields>;
}

function liveFields(s: Partial<LiveFields>): Partial<LiveFields> {
  const out: Partial<LiveFields> = {};
  for (const key of LIVE_FIELDS) {
    if (s[key] !== undefined) (out as Record<string, unknown>)[key] = s[key];
  }
  return out;
}

/** A snapshot asked for at `since`, keeping the fields of an event applied after that. */
function fromSnapshot<T extends Simulation>(snapshot: T, last: LastUpdate | null | undefined, since: number): T {
  if (!last || last.at <= since) return snapshot;
  return { ...snapshot, ...last.fields };
}

/** An event's fields over the current ones; the same object when nothing changed. */
function applyUpdate<T extends Simulation>(current: T, update: Partial<LiveFields>): T {
  const fields = liveFields(update);
  const changed = (Object.keys(fields) as Array<keyof LiveFields>).some((k) => fields[k] !== current[k]);
  return changed ? { ...current, ...fields } : current;
}

export function isRoundCompleted(event: EventMessage): event is EventMessage & { payload: SimulationRound & { simulation_id: number } } {
  const p = event.payload as Partial<SimulationRound> | undefined;
  return event.type === "round.completed" && !!p && typeof p.round === "number";
}

export function isRoundProgress(event: EventMessage): event is EventMessage & { payload: RoundProgress } {
  const p = event.payload as Partial<RoundProgress> | undefined;
  return event.type === "round.progress" && !!p && typeof p.round === "number" && typeof p.answered === "number";
}

export function isSimulationDeleted(event: EventMessage): event is EventMessage & { payload: { simulation_id: number } } {
  const p = event.payload as { simulation_id?: unknown } | undefined;
  return event.type === "simulation.deleted" && !!p && typeof p.simulation_id === "number";
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
      const simulation = fromSnapshot(action.simulation, state.lastUpdate, action.since);
      return { ...state, simulation, rounds, progress: progressAfter(state.progress, rounds, simulation) };
    }
    case "updated": {
      if (!state.simulation) return state;
      const simulation = fromSnapshot({ ...state.simulation, ...action.simulation }, state.lastUpdate, action.since);
      return { ...state, simulation, progress: progressAfter(state.progress, state.rounds, simulation) };
    }
    case "events": {
      let rounds: Map<number, SimulationRound> | null = null;
      let simulation = state.simulation;
      let progress = state.progress;
      let lastUpdate = state.lastUpdate;
      for (const event of action.events) {
        if (isRoundCompleted(event)) {
          rounds ??= new Map(state.rounds);
          rounds.set(event.payload.round, roundOf(event.payload));
        } else if (isRoundProgress(event)) {
          if (!progress || event.payload.round > progress.round || (event.payload.round === progress.round && event.payload.answered >= progress.answered)) {
            progress = event.payload;
          }
        } else if (isSimulationUpdate(event)) {
          lastUpdate = { at: action.at, fields: { ...lastUpdate?.fields, ...liveFields(event.payload) } };
          if (simulation) simulation = applyUpdate(simulation, event.payload);
          // A pause or an end drops the round in flight: a resumed run plays it again from 0.
          if (!isActive(event.payload.status)) progress = null;
        }
      }
      const allRounds = rounds ?? state.rounds;
      progress = progressAfter(progress, allRounds, simulation);
      if (!rounds && simulation === state.simulation && progress === state.progress && lastUpdate === state.lastUpdate) return state;
      return { simulation, rounds: allRounds, progress, lastUpdate };
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
  if (simulation && !isActive(simulation.status)) return null;
  return progress;
}

/** Rounds played: those the page holds, or the run's own count when events are still on their way. */
export function roundsPlayed(simulation: Pick<Simulation, "current_round">, rounds: ReadonlyMap<number, SimulationRound>): number {
  return Math.max(rounds.size, simulation.current_round);
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
  byId: ReadonlyMap<number, SimulationListItem>;
  progress: ReadonlyMap<number, RoundProgress>;
  /** Per simulation, its last simulation.updated (see SimulationView.lastUpdate). */
  lastUpdate: ReadonlyMap<number, LastUpdate>;
  /**
   * An event named a simulation the list does not have, for the first time or with a new status
   * (launched elsewhere, or now in a status the list is filtered by): refetch. A run the list's
   * filters leave out is not refetched for again until its status changes.
   */
  stale: boolean;
  loaded: boolean;
}

export const initialSimulationsState: SimulationsState = {
  byId: new Map(),
  progress: new Map(),
  lastUpdate: new Map(),
  stale: false,
  loaded: false,
};

/** As for one simulation: `since` and `at` order a list against the events (see SimulationAction). */
export type SimulationsAction = { type: "loaded"; simulations: SimulationListItem[]; since: number } | { type: "events"; events: EventMessage[]; at: number };

export function simulationsReducer(state: SimulationsState, action: SimulationsAction): SimulationsState {
  if (action.type === "loaded") {
    const byId = new Map(
      action.simulations.map((s) => [s.id, fromSnapshot(s, state.lastUpdate.get(s.id), action.since)] as const),
    );
    return { ...state, byId, stale: false, loaded: true };
  }
  let byId: Map<number, SimulationListItem> | null = null;
  let progress: Map<number, RoundProgress> | null = null;
  let lastUpdate: Map<number, LastUpdate> | null = null;
  let stale = state.stale;
  for (const event of action.events) {
    if (isRoundProgress(event)) {
      progress ??= new Map(state.progress);
      progress.set(event.payload.simulation_id, event.payload);
    } else if (isSimulationUpdate(event)) {
      const sid = event.payload.simulation_id;
      lastUpdate ??= new Map(state.lastUpdate);
      const before = lastUpdate.get(sid)?.fields.status;
      lastUpdate.set(sid, { at: action.at, fields: { ...lastUpdate.get(sid)?.fields, ...liveFields(event.payload) } });
      if (!isActive(event.payload.status) && (progress ?? state.progress).has(sid)) {
        progress ??= new Map(state.progress);
        progress.delete(sid);
      }
      const current = (byId ?? state.byId).get(sid);
      if (!current) {
        if (before !== event.payload.status) stale = true;
        continue;
      }
      const next = applyUpdate(current, event.payload);
      if (next !== current) {
        byId ??= new Map(state.byId);
        byId.set(sid, next);
      }
    } else if (isSimulationDeleted(event)) {
      // Gone with its rounds and decisions (DELETE, the CLI, another tab).
      const sid = event.payload.simulation_id;
      if ((byId ?? state.byId).has(sid)) {
        byId ??= new Map(state.byId);
        byId.delete(sid);
      }
      if ((progress ?? state.progress).has(sid)) {
        progress ??= new Map(state.progress);
        progress.delete(sid);
      }
    } else if (isRoundCompleted(event)) {
      const sid = (event.payload as { simulation_id?: number }).simulation_id;
      if (typeof sid === "number" && (progress ?? state.progress).get(sid)?.round === event.payload.round) {
        progress ??= new Map(state.progress);
        progress.delete(sid);
      }
      // The run's final metrics so far: its last kept round's.
      const current = typeof sid === "number" ? (byId ?? state.byId).get(sid) : undefined;
      if (current && event.payload.metrics) {
        byId ??= new Map(state.byId);
        byId.set(current.id, { ...current, last_metrics: event.payload.metrics });
      }
    }
  }
  if (!byId && !progress && !lastUpdate && stale === state.stale) return state;
  return { ...state, byId: byId ?? state.byId, progress: progress ?? state.progress, lastUpdate: lastUpdate ?? state.lastUpdate, stale };
}

/** A round's LLM requests over the agents it accounted for ("–" with none). */
export function callsPerAgent(r: Pick<SimulationRound, "n_valid" | "n_invalid" | "n_late" | "n_lost" | "llm_requests">): string {
  const agents = r.n_valid + r.n_invalid + r.n_late + (r.n_lost ?? 0);
  if (!agents) return "–";
  return (r.llm_requests / agents).toLocaleString("en-US", { maximumFractionDigits: 4 });
}
