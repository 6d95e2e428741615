import type { QueryOf } from "../api/typedApi";
import { TRANSCRIPT_STATUSES, type TranscriptStatus } from "../api/types";

/**
 * The transcript browser's filters: kept in the URL (prefixed `t_`, so they do not clash with
 * the page's own `round`), checked before a request, and turned into the endpoint's query.
 * Pure.
 */

export interface TranscriptFilters {
  round: string;
  status: TranscriptStatus | "";
  /** "name:value" from the population's distributions; "" for every agent. */
  attribute: string;
  min: string;
  max: string;
}

export const EMPTY_FILTERS: TranscriptFilters = { round: "", status: "", attribute: "", min: "", max: "" };

const PARAMS: Record<keyof TranscriptFilters, string> = { round: "t_round", status: "t_status", attribute: "t_attribute", min: "t_min", max: "t_max" };

function isStatus(value: string): value is TranscriptStatus {
  return (TRANSCRIPT_STATUSES as readonly string[]).includes(value);
}

/** The filters a URL's query string holds (unknown statuses dropped). */
export function filtersFromSearch(search: string): TranscriptFilters {
  const params = new URLSearchParams(search);
  const status = params.get(PARAMS.status) ?? "";
  return {
    round: params.get(PARAMS.round) ?? "",
    status: isStatus(status) ? status : "",
    attribute: params.get(PARAMS.attribute) ?? "",
    min: params.get(PARAMS.min) ?? "",
    max: params.get(PARAMS.max) ?? "",
  };
}

/** For setSearchParams: every filter's parameter, null when blank (so it leaves the URL). */
export function filtersToParams(filters: TranscriptFilters): Record<string, string | null> {
  const out: Record<string, string | null> = {};
  for (const key of Object.keys(PARAMS) as Array<keyof TranscriptFilters>) {
    const value = filters[key].trim();
    out[PARAMS[key]] = value === "" ? null : value;
  }
  return out;
}

/** What is wrong with the filters, by field; empty when they can be sent. */
export function filterProblems(filters: TranscriptFilters): Partial<Record<keyof TranscriptFilters, string>> {
  const problems: Partial<Record<keyof TranscriptFilters, string>> = {};
  if (filters.round.trim() && !/^\d+$/.test(filters.round.trim())) problems.round = "a round number";
  const min = parseBound(filters.min);
  const max = parseBound(filters.max);
  if (min === undefined) problems.min = "a number";
  if (max === undefined) problems.max = "a number";
  if (typeof min === "number" && typeof max === "number" && min > max) problems.max = "at least the minimum";
  if (filters.attribute.trim() && !/^[^:]+:.+$/.test(filters.attribute.trim())) problems.attribute = "name:value";
  return problems;
}

/** null when blank, undefined when not a number. */
function parseBound(text: string): number | null | undefined {
  const t = text.trim();
  if (!t) return null;
  const n = Number(t);
  return Number.isFinite(n) ? n : undefined;
}

/** The query of GET /api/simulations/{id}/transcripts: the filters set (checked by filterProblems), the cursor, the page size. */
export function transcriptQuery(filters: TranscriptFilters, after: string | null, limit: number): QueryOf<"/api/simulations/{simulation_id}/transcripts"> {
  const query: QueryOf<"/api/simulations/{simulation_id}/transcripts"> = {};
  const round = numberOrNull(filters.round);
  const min = numberOrNull(filters.min);
  const max = numberOrNull(filters.max);
  if (round !== null) query.round = round;
  if (filters.status) query.status = filters.status;
  if (filters.attribute.trim()) query.attribute = filters.attribute.trim();
  if (min !== null) query.min = min;
  if (max !== null) query.max = max;
  if (after !== null) query.after = Number(after);
  query.limit = limit;
  return query;
}

/** The query of GET /api/agents/{id}/transcripts: one simulation's rounds, a page at a time. */
export function agentTranscriptQuery(simulationId: number, after: string | null, limit: number): QueryOf<"/api/agents/{agent_id}/transcripts"> {
  return after === null ? { simulation_id: simulationId, limit } : { simulation_id: simulationId, after: Number(after), limit };
}

/** A filter's number; null when blank. */
function numberOrNull(text: string): number | null {
  return text.trim() ? Number(text.trim()) : null;
}

/** The segments to filter by: "name:value" for each category of each distribution the population has. */
export function segmentOptions(counts: Record<string, Record<string, number>> | null | undefined): Array<{ value: string; label: string }> {
  const options: Array<{ value: string; label: string }> = [];
  for (const name of Object.keys(counts ?? {}).sort()) {
    const categories = counts?.[name] ?? {};
    for (const category of Object.keys(categories).sort((a, b) => a.localeCompare(b, "en", { numeric: true }))) {
      options.push({ value: `${name}:${category}`, label: `${name} = ${category} (${(categories[category] ?? 0).toLocaleString("en-US")})` });
    }
  }
  return options;
}

/**
 * A prompt as text: chat messages as "role:" blocks, a completions prompt as is, anything
 * else as JSON (the manager rebuilds it; its shape follows the run's API).
 */
export function promptText(prompt: unknown): string {
  if (prompt === null || prompt === undefined) return "";
  if (typeof prompt === "string") return prompt;
  if (Array.isArray(prompt) && prompt.every((m) => m && typeof m === "object" && "content" in m)) {
    return prompt
      .map((m) => {
        const { role, content } = m as { role?: unknown; content?: unknown };
        return `${typeof role === "string" ? role : "message"}:\n${typeof content === "string" ? content : JSON.stringify(content, null, 2)}`;
      })
      .join("\n\n");
  }
  return JSON.stringify(prompt, null, 2);
}

/** The cursor as the next request sends it (the API's next_after may be a number or a string). */
export function cursorOf(nextAfter: string | number | null | undefined): string | null {
  return nextAfter === null || nextAfter === undefined ? null : String(nextAfter);
}
