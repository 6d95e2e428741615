/**
 * A running run's pace: rounds per minute and the time left, from when its last rounds
 * finished. Pure: the page hands in the finish times (the timeline's round entries).
 */

/** When a round finished (ms since the epoch). */
export interface RoundTime {
  round: number;
  at: number;
}

export interface Pace {
  /** null until two rounds have finished (or one, given when the run started). */
  roundsPerMinute: number | null;
  /** Seconds until the last round finishes at this pace; null when unknown or not running. */
  etaSeconds: number | null;
}

/** The pace is that of the last PACE_WINDOW rounds: a run slows down or speeds up over time. */
export const PACE_WINDOW = 10;

const UNKNOWN: Pace = { roundsPerMinute: null, etaSeconds: null };

/**
 * Rounds per minute over the latest finished rounds, and the ETA of the run's last round.
 * `startedAt` (ms) stands in for the finish of "round 0" when one round has finished;
 * a round played twice (a resume replays the round in flight) counts at its latest finish.
 */
export function pace(times: readonly RoundTime[], totalRounds: number, startedAt: number | null = null): Pace {
  const latest = new Map<number, number>();
  for (const t of times) {
    if (Number.isFinite(t.at)) latest.set(t.round, Math.max(latest.get(t.round) ?? -Infinity, t.at));
  }
  const points = [...latest.entries()].map(([round, at]) => ({ round, at })).sort((a, b) => a.round - b.round);
  const played = points.at(-1)?.round ?? 0;
  const only = points[0];
  if (points.length === 1 && only !== undefined && startedAt !== null && Number.isFinite(startedAt)) {
    points.unshift({ round: only.round - 1, at: startedAt });
  }
  const window = points.slice(-(PACE_WINDOW + 1));
  const first = window[0];
  const last = window.at(-1);
  if (window.length < 2 || first === undefined || last === undefined) return UNKNOWN;
  const rounds = last.round - first.round;
  const ms = last.at - first.at;
  if (rounds <= 0 || ms <= 0) return UNKNOWN;
  const perMs = rounds / ms;
  const left = Math.max(0, totalRounds - played);
  return { roundsPerMinute: perMs * 60_000, etaSeconds: left / perMs / 1000 };
}

/** "12.5 rounds/min" (or "–"). */
export function formatPace(roundsPerMinute: number | null): string {
  if (roundsPerMinute === null || !Number.isFinite(roundsPerMinute)) return "–";
  const digits = roundsPerMinute < 10 ? 2 : roundsPerMinute < 100 ? 1 : 0;
  return `${roundsPerMinute.toLocaleString("en-US", { maximumFractionDigits: digits })} rounds/min`;
}
