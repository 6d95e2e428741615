import { describe, expect, it } from "vitest";
import type { EventMessage, Simulation, SimulationDetail, SimulationRound } from "../api/types";
import {
  callsPerAgent,
  anyLost,
  anyPromptTokens,
  anyTargets,
  anyShortfall,
  belowFloorText,
  describeRule,
  equilibrium,
  histogramBins,
  initialSimulationView,
  initialSimulationsState,
  lostText,
  participationText,
  pauseText,
  promptCache,
  promptCacheText,
  promptTokenTotals,
  resolveRule,
  roundSeries,
  roundsPlayed,
  simulationActions,
  simulationReducer,
  simulationsReducer,
  sortedRounds,
} from "./simulations";

function simulation(overrides: Partial<SimulationDetail> = {}): SimulationDetail {
  return {
    id: 3,
    population_id: 1,
    name: "level-k",
    status: "running",
    rounds: 6,
    current_round: 0,
    seed: "1",
    error: null,
    stop_reason: null,
    pause_reason: null,
    lost_agents: 0,
    created_at: "2026-01-01T00:00:00Z",
    started_at: null,
    finished_at: null,
    config: { rule: { preset: "1/2+5", ratio: null, offset: null, min: 0, max: 100 }, policy: { kind: "level_k" } },
    models: [],
    version: "0.1.0",
    prompt_tokens: 0,
    cached_prompt_tokens: 0,
    completion_tokens: 0,
    stores_changes: false,
    participation_floor: 0.8,
    rounds_below_floor: 0,
    ...overrides,
  };
}

function round(n: number, mean: number): SimulationRound {
  return {
    round: n,
    n_valid: 1000,
    n_invalid: 0,
    n_late: 0,
    n_lost: 0,
    mean,
    median: mean,
    std: 0,
    min: mean,
    max: mean,
    target: mean / 2 + 5,
    winner_value: mean,
    winner_count: 1000,
    winner_agents: [],
    histogram: [1000],
    segments: {},
    prompt_tokens: 0,
    cached_prompt_tokens: 0,
    completion_tokens: 0,
    llm_errors: 0,
    llm_requests: 0,
    duration_s: 0.1,
    network_bytes: 0,
    decisions_stored: null,
    participation: 1,
    parse_failure_rate: 0,
  };
}

const completed = (seq: number, n: number, mean: number): EventMessage => ({
  type: "round.completed",
  topic: "simulation:3",
  seq,
  payload: { simulation_id: 3, rounds: 6, ...round(n, mean) },
});
const progress = (seq: number, n: number, answered: number): EventMessage => ({
  type: "round.progress",
  topic: "simulation:3",
  seq,
  payload: { simulation_id: 3, round: n, rounds: 6, answered, total: 1000 },
});
const updated = (seq: number, status: string, current_round: number, extra: Record<string, unknown> = {}): EventMessage => ({
  type: "simulation.updated",
  topic: "simulation:3",
  seq,
  payload: { simulation_id: 3, population_id: 1, status, rounds: 6, current_round, error: null, stop_reason: null, pause_reason: null, lost_agents: 0, ...extra },
});

describe("the rule", () => {
  it("has the paper's equilibria: 0 for 2/3 and 51/100, 10 for 1/2 + 5", () => {
    for (const [preset, eq] of [
      ["2/3", 0],
      ["51/100", 0],
      ["1/2+5", 10],
    ] as const) {
      expect(equilibrium(resolveRule({ preset, ratio: null, offset: null, min: 0, max: 100 }))).toBeCloseTo(eq);
    }
  });

  it("clips the fixed point to the range, and has none from ratio 1 on", () => {
    expect(equilibrium({ ratio: 0.5, offset: 80, min: 0, max: 100 })).toBe(100);
    expect(equilibrium({ ratio: 0.5, offset: -20, min: 0, max: 100 })).toBe(0);
    expect(equilibrium({ ratio: 0.5, offset: 5, min: 20, max: 100 })).toBe(20);
    expect(equilibrium({ ratio: 1.2, offset: 0, min: 0, max: 100 })).toBeNull();
  });

  it("reads as people write it", () => {
    expect(describeRule(resolveRule({ preset: "1/2+5", ratio: null, offset: null, min: 0, max: 100 }))).toBe(
      "target = 1/2 × mean + 5 on [0, 100]",
    );
    expect(describeRule({ ratio: 0.8, offset: -3, min: 0, max: 50 })).toBe("target = 0.8 × mean − 3 on [0, 50]");
  });

  it("centers the histogram's bins as the server bins them", () => {
    const { centers, width } = histogramBins(0, 100, 101);
    expect(centers).toHaveLength(101);
    expect(width).toBeCloseTo(100 / 101);
    expect(centers[0]).toBeCloseTo(50 / 101);
    expect(centers[100]).toBeCloseTo(100 - 50 / 101);
  });
});

describe("validity gates", () => {
  it("says how many rounds fell below the participation floor", () => {
    expect(belowFloorText({ rounds_below_floor: 2, participation_floor: 0.8 })).toBe(
      "2 rounds had fewer valid answers than the participation floor (80 % of the agents)",
    );
    expect(belowFloorText({ rounds_below_floor: 1, participation_floor: 0.5 })).toBe(
      "1 round had fewer valid answers than the participation floor (50 % of the agents)",
    );
  });

  it("shows participation only when some agent gave no valid answer", () => {
    expect(anyShortfall([round(1, 30), round(2, 20)])).toBe(false);
    expect(anyShortfall([round(1, 30), { ...round(2, 20), participation: 0.75 }])).toBe(true);
    // An older manager's rounds carry no participation: nothing to show.
    expect(anyShortfall([{ ...round(1, 30), participation: null }])).toBe(false);
    expect(participationText({ participation: 0.75 })).toBe("75.0 %");
    expect(participationText({ participation: null })).toBe("–");
  });

  it("follows the count of rounds below the floor from the update event", () => {
    let state = simulationReducer(initialSimulationView, { type: "snapshot", simulation: simulation({ status: "running" }), rounds: [], since: 0 });
    state = simulationReducer(state, { type: "events", events: [updated(5, "completed", 6, { rounds_below_floor: 3 })], at: 1 });
    expect(state.simulation?.rounds_below_floor).toBe(3);
  });
});

describe("simulationReducer", () => {
  it("takes start and finish times from the update event, so a finished run reads as finished", () => {
    let state = simulationReducer(initialSimulationView, { type: "snapshot", simulation: simulation({ status: "running", started_at: null, finished_at: null }), rounds: [], since: 0 });
    state = simulationReducer(state, { type: "events", events: [updated(5, "running", 0, { started_at: "2026-12-05T07:00:00Z", finished_at: null })], at: 1 });
    expect(state.simulation).toMatchObject({ started_at: "2026-12-05T07:00:00Z", finished_at: null });
    state = simulationReducer(state, { type: "events", events: [updated(9, "completed", 6, { started_at: "2026-12-05T07:00:00Z", finished_at: "2026-12-05T07:00:12Z" })], at: 2 });
    expect(state.simulation).toMatchObject({ status: "completed", finished_at: "2026-12-05T07:00:12Z" });
    // An older manager's event says nothing of the times: they stay as they were.
    state = simulationReducer(state, { type: "events", events: [updated(10, "completed", 6)], at: 3 });
    expect(state.simulation?.finished_at).toBe("2026-12-05T07:00:12Z");
  });

  it("counts rounds played from the run when its round events are still on their way", () => {
    const rounds = new Map([[1, round(1, 30)]]);
    expect(roundsPlayed({ current_round: 3 }, rounds)).toBe(3);
    expect(roundsPlayed({ current_round: 0 }, rounds)).toBe(1);
  });

  it("keeps one entry per round whether it came by event, replay or snapshot", () => {
    let state = simulationReducer(initialSimulationView, { type: "snapshot", simulation: simulation(), rounds: [round(1, 30)], since: 0 });
    state = simulationReducer(state, { type: "events", events: [completed(10, 1, 30), completed(11, 2, 20)], at: 1 });
    state = simulationReducer(state, { type: "events", events: [completed(11, 2, 20), completed(12, 3, 15)], at: 2 });
    state = simulationReducer(state, { type: "snapshot", simulation: simulation({ current_round: 2 }), rounds: [round(1, 30), round(2, 20)], since: 0 });
    expect(sortedRounds(state.rounds).map((r) => [r.round, r.mean])).toEqual([
      [1, 30],
      [2, 20],
      [3, 15],
    ]);
    // The event payload's simulation_id and rounds are not round fields.
    expect(state.rounds.get(3)).toEqual(round(3, 15));
  });

  it("keeps an event's status when a snapshot asked for before it lands after it", () => {
    let state = simulationReducer(initialSimulationView, { type: "snapshot", simulation: simulation(), rounds: [], since: 0 });
    state = simulationReducer(state, { type: "events", events: [updated(20, "completed", 6)], at: 3 });
    state = simulationReducer(state, { type: "snapshot", simulation: simulation({ status: "running", current_round: 4 }), rounds: [], since: 0 });
    expect(state.simulation?.status).toBe("completed");
    expect(state.simulation?.current_round).toBe(6);
  });

  it("shows the round in play until it completes, and nothing once the run ended", () => {
    let state = simulationReducer(initialSimulationView, { type: "snapshot", simulation: simulation(), rounds: [], since: 0 });
    state = simulationReducer(state, { type: "events", events: [progress(1, 1, 0), progress(2, 1, 400)], at: 4 });
    expect(state.progress?.answered).toBe(400);
    // A late progress of the same round does not move the bar back.
    state = simulationReducer(state, { type: "events", events: [progress(3, 1, 100)], at: 5 });
    expect(state.progress?.answered).toBe(400);
    state = simulationReducer(state, { type: "events", events: [completed(4, 1, 30)], at: 6 });
    expect(state.progress).toBeNull();
    state = simulationReducer(state, { type: "events", events: [progress(5, 2, 10), updated(6, "cancelled", 1)], at: 7 });
    expect(state.progress).toBeNull();
    expect(state.simulation?.status).toBe("cancelled");
  });

  it("follows a run paused and resumed: the status goes back to running, the dropped round plays again", () => {
    let state = simulationReducer(initialSimulationView, { type: "snapshot", simulation: simulation({ current_round: 3 }), rounds: [], since: 0 });
    state = simulationReducer(state, { type: "events", events: [progress(1, 4, 700)], at: 1 });
    state = simulationReducer(state, { type: "events", events: [updated(2, "paused", 3, { pause_reason: "paused by an operator" })], at: 2 });
    expect(state.simulation).toMatchObject({ status: "paused", pause_reason: "paused by an operator", current_round: 3 });
    expect(state.progress).toBeNull();
    // Round 4 starts again from 0 answers after the resume, in the same batch or the next.
    state = simulationReducer(state, { type: "events", events: [updated(3, "running", 3), progress(4, 4, 10)], at: 3 });
    expect(state.simulation).toMatchObject({ status: "running", pause_reason: null });
    expect(state.progress?.answered).toBe(10);
    state = simulationReducer(state, {
      type: "events",
      events: [progress(5, 4, 500), updated(6, "paused", 3, { pause_reason: "r" }), updated(7, "running", 3), progress(8, 4, 20)],
      at: 4,
    });
    expect(state.progress?.answered).toBe(20);
  });

  it("takes a snapshot asked for after the last status event as the truth (a resync)", () => {
    let state = simulationReducer(initialSimulationView, { type: "snapshot", simulation: simulation(), rounds: [], since: 0 });
    state = simulationReducer(state, { type: "events", events: [updated(1, "paused", 2, { pause_reason: "LLM endpoint down" })], at: 1 });
    // Events were missed (the manager restarted); the snapshot asked for after them says running.
    state = simulationReducer(state, { type: "snapshot", simulation: simulation({ status: "running", current_round: 3 }), rounds: [], since: 1 });
    expect(state.simulation).toMatchObject({ status: "running", current_round: 3, pause_reason: null });
  });

  it("keeps the events' fields when they came before the snapshot did", () => {
    // The status event arrives before the first snapshot is in: it is not lost.
    let state = simulationReducer(initialSimulationView, { type: "events", events: [updated(1, "failed", 2, { error: "boom" })], at: 1 });
    state = simulationReducer(state, { type: "snapshot", simulation: simulation({ status: "running", current_round: 2 }), rounds: [], since: 0 });
    expect(state.simulation).toMatchObject({ status: "failed", error: "boom" });
  });

  it("applies an action's answer unless a newer event already said more", () => {
    let state = simulationReducer(initialSimulationView, { type: "snapshot", simulation: simulation({ status: "failed", error: "x" }), rounds: [], since: 0 });
    // Resume answers running; no event came since the request: it applies.
    state = simulationReducer(state, { type: "updated", simulation: simulation({ status: "running", error: null }), since: 0 });
    expect(state.simulation?.status).toBe("running");
    // A pause whose answer comes after the run already completed (event at 1, asked at 0).
    state = simulationReducer(state, { type: "events", events: [updated(1, "completed", 6)], at: 1 });
    state = simulationReducer(state, { type: "updated", simulation: simulation({ status: "running", current_round: 5 }), since: 0 });
    expect(state.simulation).toMatchObject({ status: "completed", current_round: 6 });
  });

  it("ignores events it does not know and returns the same state", () => {
    const state = simulationReducer(initialSimulationView, { type: "snapshot", simulation: simulation(), rounds: [], since: 0 });
    expect(simulationReducer(state, { type: "events", events: [{ type: "worker.updated", seq: 9 }], at: 8 })).toBe(state);
  });

  it("makes the chart's columns, the equilibrium a flat line", () => {
    const series = roundSeries([round(1, 30), round(2, 20)], 10);
    expect(series).toEqual([
      [1, 2],
      [30, 20],
      [20, 15],
      [30, 20],
      [10, 10],
    ]);
  });
});

describe("what a run offers", () => {
  it("pauses a running run, resumes a paused or failed one, cancels until it is finished, then deletes", () => {
    expect(simulationActions("running")).toEqual({ pause: true, resume: false, cancel: true, delete: false });
    expect(simulationActions("pending")).toEqual({ pause: true, resume: false, cancel: true, delete: false });
    expect(simulationActions("paused")).toEqual({ pause: false, resume: true, cancel: true, delete: false });
    expect(simulationActions("failed")).toEqual({ pause: false, resume: true, cancel: false, delete: true });
    expect(simulationActions("completed")).toEqual({ pause: false, resume: false, cancel: false, delete: true });
    expect(simulationActions("cancelled")).toEqual({ pause: false, resume: false, cancel: false, delete: true });
  });

  it("says why and where a run is paused", () => {
    expect(pauseText({ current_round: 3, rounds: 10, pause_reason: "paused by an operator" })).toBe(
      "Paused after round 3 of 10: paused by an operator",
    );
    expect(pauseText({ current_round: 0, rounds: 10, pause_reason: null })).toBe("Paused before its first round: no reason given");
  });

  it("counts lost agents, and shows the column only when a round lost some", () => {
    expect(lostText(400)).toBe("400 agent answers counted lost over the kept rounds (no live worker hosted those agents)");
    expect(lostText(1)).toBe("1 agent answer counted lost over the kept rounds (no live worker hosted that agent)");
    expect(anyLost([round(1, 30), round(2, 20)])).toBe(false);
    expect(anyLost([round(1, 30), { ...round(2, 20), n_lost: 400 }])).toBe(true);
  });

  it("has the guessing game's target and winner only when a round has one (other plugins' rounds have neither)", () => {
    const plugin = { ...round(1, 0.5), target: null, winner_value: null, winner_count: 0 };
    expect(anyTargets([plugin, { ...plugin, round: 2 }])).toBe(false);
    expect(anyTargets([])).toBe(false);
    expect(anyTargets([plugin, round(2, 30)])).toBe(true);
    expect(anyTargets([{ ...plugin, winner_value: 12 }])).toBe(true);
  });
});

describe("prompt tokens from the servers' prefix cache", () => {
  const llmRound = (n: number, prompt: number, cached: number): SimulationRound => ({ ...round(n, 30), prompt_tokens: prompt, cached_prompt_tokens: cached });

  it("shows the share, the count and the total, and nothing without prompt tokens", () => {
    expect(promptCacheText(1200, 3200)).toBe("37.5 % (1,200 of 3,200)");
    expect(promptCache(1200, 3200)).toEqual({ percent: "37.5 %", counts: "1,200 of 3,200" });
    expect(promptCacheText(0, 500)).toBe("0.0 % (0 of 500)");
    expect(promptCacheText(0, 0)).toBeNull();
    expect(promptCache(undefined, undefined)).toBeNull();
  });

  it("sums the rounds for the run, live as round.completed events land", () => {
    let state = simulationReducer(initialSimulationView, { type: "snapshot", simulation: simulation({ prompt_tokens: 1000 }), rounds: [llmRound(1, 1000, 0)], since: 0 });
    const event: EventMessage = { type: "round.completed", topic: "simulation:3", seq: 1, payload: { simulation_id: 3, rounds: 6, ...llmRound(2, 1000, 900) } };
    state = simulationReducer(state, { type: "events", events: [event], at: 1 });
    const rounds = sortedRounds(state.rounds);
    expect(promptTokenTotals(rounds)).toEqual({ prompt: 2000, cached: 900 });
    expect(promptCacheText(promptTokenTotals(rounds).cached, promptTokenTotals(rounds).prompt)).toBe("45.0 % (900 of 2,000)");
    expect(anyPromptTokens(rounds)).toBe(true);
    expect(anyPromptTokens([round(1, 30)])).toBe(false);
  });
});

describe("simulationsReducer", () => {
  const listed = (id: number, overrides: Partial<Simulation> = {}): Simulation => ({ ...simulation({ id }), ...overrides });

  it("follows status and rounds live, and asks for a refetch for a run it does not list", () => {
    let state = simulationsReducer(initialSimulationsState, { type: "loaded", simulations: [listed(3, { status: "pending" })], since: 0 });
    state = simulationsReducer(state, { type: "events", events: [updated(1, "running", 0), progress(2, 1, 500)], at: 9 });
    expect(state.byId.get(3)?.status).toBe("running");
    expect(state.progress.get(3)?.answered).toBe(500);
    state = simulationsReducer(state, { type: "events", events: [completed(3, 1, 30)], at: 10 });
    expect(state.progress.has(3)).toBe(false);
    const other: EventMessage = { ...updated(4, "pending", 0), payload: { ...updated(4, "pending", 0).payload, simulation_id: 9 } };
    state = simulationsReducer(state, { type: "events", events: [other], at: 11 });
    expect(state.stale).toBe(true);
  });

  it("follows a pause and a resume, and drops the paused run's progress", () => {
    let state = simulationsReducer(initialSimulationsState, { type: "loaded", simulations: [listed(3, { status: "running" })], since: 0 });
    state = simulationsReducer(state, { type: "events", events: [progress(1, 2, 300)], at: 1 });
    state = simulationsReducer(state, { type: "events", events: [updated(2, "paused", 1, { pause_reason: "paused by an operator" })], at: 2 });
    expect(state.byId.get(3)).toMatchObject({ status: "paused", pause_reason: "paused by an operator" });
    expect(state.progress.has(3)).toBe(false);
    // A list asked for before the pause event keeps it; one asked for after is the truth.
    state = simulationsReducer(state, { type: "loaded", simulations: [listed(3, { status: "running" })], since: 1 });
    expect(state.byId.get(3)?.status).toBe("paused");
    state = simulationsReducer(state, { type: "events", events: [updated(3, "running", 1)], at: 3 });
    expect(state.byId.get(3)?.status).toBe("running");
    state = simulationsReducer(state, { type: "loaded", simulations: [listed(3, { status: "completed", current_round: 6 })], since: 3 });
    expect(state.byId.get(3)?.status).toBe("completed");
  });

  it("drops a run deleted meanwhile, with its progress", () => {
    let state = simulationsReducer(initialSimulationsState, { type: "loaded", simulations: [listed(3), listed(4)], since: 0 });
    state = simulationsReducer(state, { type: "events", events: [progress(1, 1, 200)], at: 1 });
    const deleted: EventMessage = { type: "simulation.deleted", topic: "simulation:3", seq: 2, payload: { simulation_id: 3 } };
    state = simulationsReducer(state, { type: "events", events: [deleted], at: 2 });
    expect([...state.byId.keys()]).toEqual([4]);
    expect(state.progress.has(3)).toBe(false);
  });

  it("refetches for a run it does not list once per status, so a filtered-out run does not reload the list each round", () => {
    let state = simulationsReducer(initialSimulationsState, { type: "loaded", simulations: [listed(3)], since: 0 });
    const other = (status: "running" | "paused", round: number): EventMessage => ({ ...updated(1, status, round), payload: { ...updated(1, status, round).payload, simulation_id: 9 } });
    state = simulationsReducer(state, { type: "events", events: [other("running", 1)], at: 1 });
    expect(state.stale).toBe(true);
    state = simulationsReducer(state, { type: "loaded", simulations: [listed(3)], since: 1 });
    state = simulationsReducer(state, { type: "events", events: [other("running", 2)], at: 2 });
    expect(state.stale).toBe(false);
    state = simulationsReducer(state, { type: "events", events: [other("paused", 2)], at: 3 });
    expect(state.stale).toBe(true);
  });

  it("keeps a listed run's final metrics as its rounds complete", () => {
    let state = simulationsReducer(initialSimulationsState, { type: "loaded", simulations: [{ ...listed(3, { status: "running" }), last_metrics: { mean: 40 } }], since: 0 });
    const done: EventMessage = { ...completed(3, 2, 30), payload: { ...completed(3, 2, 30).payload, metrics: { mean: 30 } } };
    state = simulationsReducer(state, { type: "events", events: [done], at: 1 });
    expect(state.byId.get(3)?.last_metrics).toEqual({ mean: 30 });
  });

  it("keeps what events said when a slower list arrives", () => {
    let state = simulationsReducer(initialSimulationsState, { type: "loaded", simulations: [listed(3, { status: "running" })], since: 0 });
    state = simulationsReducer(state, { type: "events", events: [updated(1, "completed", 6)], at: 12 });
    state = simulationsReducer(state, { type: "loaded", simulations: [listed(3, { status: "running", current_round: 5 })], since: 0 });
    expect(state.byId.get(3)).toMatchObject({ status: "completed", current_round: 6 });
    expect(state.stale).toBe(false);
  });
});

describe("callsPerAgent", () => {
  it("divides a round's LLM requests by the agents it accounted for", () => {
    expect(callsPerAgent({ n_valid: 98, n_invalid: 1, n_late: 1, n_lost: 0, llm_requests: 2 })).toBe("0.02");
    expect(callsPerAgent({ n_valid: 10, n_invalid: 0, n_late: 0, n_lost: 0, llm_requests: 10 })).toBe("1");
    expect(callsPerAgent({ n_valid: 0, n_invalid: 0, n_late: 0, n_lost: 0, llm_requests: 0 })).toBe("–");
  });
});
