import type { LaunchEstimate } from "./launch";

/** How a run's agents with identical prompts are answered (the workers' rule, as the API names it). */
export type LlmMode = "per_agent" | "shared" | "exchangeable";

/** What POST /api/simulations/estimate answers, with how it counted the requests. */
export interface RunEstimate extends LaunchEstimate {
  llm_mode?: LlmMode | null;
  /** Different prompts in round 1, counted per worker process. */
  distinct_prompts?: number;
  /** Reads of a shared prompt's answer distribution, over every round. */
  reads?: number;
  per_round?: { round: number; requests: number; asks: number; reads: number }[];
  /** How the estimate assumed answers spread (null when nothing depends on it). */
  assumption?: string | null;
}

/** The run card's short name for the mode, in plain words. */
export const LLM_MODE_LABEL: Readonly<Record<LlmMode, string>> = {
  per_agent: "one request per agent",
  shared: "agents with the same prompt share one answer",
  exchangeable: "agents with the same prompt share one answer distribution",
};

/** What the mode means, for a tooltip. */
export const LLM_MODE_HINT: Readonly<Record<LlmMode, string>> = {
  per_agent: "Every agent sends its own request to the model.",
  shared: "Temperature 0: the model would give them all the same answer, so one request answers every agent with that prompt.",
  exchangeable:
    "The first few agents with a prompt ask the model; then the prompt's answer distribution is read once from the model's log-probabilities, and every other agent with that prompt draws its own answer from it.",
};

/** The label of a mode the API named, or the name itself for one this dashboard does not know. */
export function llmModeLabel(mode: string): string {
  return (LLM_MODE_LABEL as Record<string, string>)[mode] ?? mode;
}

/** What a mode the API named means, for a tooltip ("" for one this dashboard does not know). */
export function llmModeHint(mode: string): string {
  return (LLM_MODE_HINT as Record<string, string>)[mode] ?? "";
}

const count = (x: number) => Math.round(x).toLocaleString("en-US");

/**
 * How the estimate's requests come about, in plain words:
 * "agents with the same prompt share one answer distribution: about 40 reads a round (1,200 prompts in round 1)".
 */
export function sharingText(e: RunEstimate): string {
  if (!e.llm_mode || e.requests === 0) return "";
  const label = llmModeLabel(e.llm_mode);
  const distinct = e.distinct_prompts ?? 0;
  const prompts = distinct === 0 ? "" : distinct === 1 ? " (one prompt for all in round 1)" : ` (${count(distinct)} different prompts in round 1)`;
  if (e.llm_mode === "exchangeable") {
    const reads = (e.reads ?? 0) / Math.max(1, e.rounds);
    if (reads === 0) return `${label}, but no prompt has enough agents to be worth a read: each one asks${prompts}`;
    const perRound = reads < 0.5 ? "less than one read" : Math.round(reads) === 1 ? "about 1 read" : `about ${count(reads)} reads`;
    return `${label}: ${perRound} a round${prompts}`;
  }
  if (e.llm_mode === "shared") return `${label}${prompts}`;
  return label;
}
