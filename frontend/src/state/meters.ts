import type { EndpointMeter, SimulationRound } from "../api/types";
import { parseServerTime } from "../format";

/**
 * The LLM meters as the simulation page shows them: per endpoint, per round or summed over a
 * run, with their formatting; and when a run and its rounds started and finished. Pure.
 */

/** One endpoint is its URL and model: the same server answering two models is two rows. */
export function meterKey(m: Pick<EndpointMeter, "base_url" | "model">): string {
  return `${m.model}@${m.base_url}`;
}

function addNullable(a: number | null, b: number | null): number | null {
  if (a === null) return b;
  if (b === null) return a;
  return a + b;
}

/**
 * Meters of several rounds summed per endpoint (first-seen order). Counts and cost add up;
 * latency percentiles and rates do not, so a sum keeps the worst p50/p95 seen (an upper bound,
 * said so in the table) and a requests-weighted mean rate.
 */
export function sumMeters(groups: ReadonlyArray<readonly EndpointMeter[] | undefined>): EndpointMeter[] {
  const byKey = new Map<string, EndpointMeter & { rateWeight: number }>();
  for (const meters of groups) {
    for (const m of meters ?? []) {
      const key = meterKey(m);
      const seen = byKey.get(key);
      if (!seen) {
        byKey.set(key, { ...m, rateWeight: m.requests_per_s === null ? 0 : m.requests });
        continue;
      }
      const weight = m.requests_per_s === null ? 0 : m.requests;
      const totalWeight = seen.rateWeight + weight;
      const rate =
        totalWeight > 0 ? ((seen.requests_per_s ?? 0) * seen.rateWeight + (m.requests_per_s ?? 0) * weight) / totalWeight : (seen.requests_per_s ?? m.requests_per_s);
      byKey.set(key, {
        base_url: m.base_url,
        model: m.model,
        requests: seen.requests + m.requests,
        errors: seen.errors + m.errors,
        skipped: seen.skipped + m.skipped,
        breaker_opened: (seen.breaker_opened ?? 0) + (m.breaker_opened ?? 0),
        breaker_half_opened: (seen.breaker_half_opened ?? 0) + (m.breaker_half_opened ?? 0),
        breaker_closed: (seen.breaker_closed ?? 0) + (m.breaker_closed ?? 0),
        late: seen.late + m.late,
        prompt_tokens: seen.prompt_tokens + m.prompt_tokens,
        completion_tokens: seen.completion_tokens + m.completion_tokens,
        latency_p50_s: maxNullable(seen.latency_p50_s, m.latency_p50_s),
        latency_p95_s: maxNullable(seen.latency_p95_s, m.latency_p95_s),
        requests_per_s: rate,
        cost_usd: addNullable(seen.cost_usd, m.cost_usd),
        rateWeight: totalWeight,
      });
    }
  }
  return [...byKey.values()].map(({ rateWeight: _w, ...m }) => m);
}

function maxNullable(a: number | null, b: number | null): number | null {
  if (a === null) return b;
  if (b === null) return a;
  return Math.max(a, b);
}

/** The run's meters: the manager's stored sums when it sends them, else the rounds' summed here. */
export function runMeters(stored: readonly EndpointMeter[] | undefined, rounds: readonly SimulationRound[]): EndpointMeter[] {
  if (stored && stored.length > 0) return [...stored];
  return sumMeters(rounds.map((r) => r.endpoints));
}

/** The total over endpoints, for a table's footer (null cost when no endpoint has a price). */
export function totalOf(meters: readonly EndpointMeter[]): EndpointMeter | null {
  if (meters.length < 2) return null;
  const [total] = sumMeters([meters.map((m) => ({ ...m, base_url: "", model: "" }))]);
  return total ?? null;
}

export function formatCount(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return "–";
  return Math.round(n).toLocaleString("en-US");
}

/** "0.84 s", "120 ms"; "–" when nothing was measured. */
export function formatLatency(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "–";
  if (seconds < 1) return `${Math.round(seconds * 1000).toLocaleString("en-US")} ms`;
  return `${seconds.toLocaleString("en-US", { maximumFractionDigits: 2 })} s`;
}

export function formatRate(perSecond: number | null | undefined): string {
  if (perSecond === null || perSecond === undefined || !Number.isFinite(perSecond)) return "–";
  return `${perSecond.toLocaleString("en-US", { maximumFractionDigits: perSecond < 10 ? 2 : 1 })}/s`;
}

/** "$0.0042", "$12.50"; "–" for an endpoint without a price. Small sums keep 2 significant digits. */
export function formatCost(usd: number | null | undefined): string {
  if (usd === null || usd === undefined || !Number.isFinite(usd)) return "–";
  if (usd === 0) return "$0";
  if (Math.abs(usd) < 0.01) return `$${usd.toPrecision(2)}`;
  return `$${usd.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
}

/** "42 s", "3 min 5 s", "2 h 4 min"; "–" when unknown. */
export function formatDuration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds) || seconds < 0) return "–";
  if (seconds < 60) return `${seconds.toLocaleString("en-US", { maximumFractionDigits: seconds < 10 ? 2 : 1 })} s`;
  const whole = Math.round(seconds);
  const h = Math.floor(whole / 3600);
  const min = Math.floor((whole % 3600) / 60);
  const s = whole % 60;
  return h > 0 ? `${h} h ${min} min` : `${min} min ${s} s`;
}

/** "2026-12-03 23:09:05 UTC": exact and unambiguous, for a record of when a run played. */
export function formatTimestamp(iso: string | null | undefined): string {
  if (!iso) return "–";
  const ms = parseServerTime(iso);
  if (Number.isNaN(ms)) return "–";
  return `${new Date(ms).toISOString().slice(0, 19).replace("T", " ")} UTC`;
}

export interface Span {
  started: string | null;
  finished: string | null;
  /** Seconds; for a run still going, up to `nowMs`. */
  seconds: number | null;
}

/** A run's start, finish and duration (to now while it runs). */
export function runSpan(run: { started_at: string | null; finished_at: string | null }, nowMs: number): Span {
  if (!run.started_at) return { started: null, finished: run.finished_at, seconds: null };
  const start = parseServerTime(run.started_at);
  const end = run.finished_at ? parseServerTime(run.finished_at) : nowMs;
  const seconds = Number.isNaN(start) || Number.isNaN(end) ? null : Math.max(0, (end - start) / 1000);
  return { started: run.started_at, finished: run.finished_at, seconds };
}

/** A round's span: stored as its finish and duration, so its start is the one minus the other. */
export function roundSpan(round: Pick<SimulationRound, "duration_s" | "finished_at">): Span {
  if (!round.finished_at) return { started: null, finished: null, seconds: round.duration_s };
  const end = parseServerTime(round.finished_at);
  if (Number.isNaN(end)) return { started: null, finished: null, seconds: round.duration_s };
  return { started: new Date(end - round.duration_s * 1000).toISOString(), finished: round.finished_at, seconds: round.duration_s };
}

/** Whether any meter has a price (the cost column shows only then). */
export function anyCost(meters: readonly EndpointMeter[]): boolean {
  return meters.some((m) => m.cost_usd !== null && m.cost_usd !== undefined);
}
