import type { ValidationIssue } from "../api/types";
import type { RulePreset } from "./simulations";

/**
 * The launch form: its values, the simulation config they make (the REST body the manager
 * validates, backend/simulations/config.py), and the manager's 422 locs mapped back onto the
 * form's fields. Pure, so the mapping is unit-tested.
 */

export type PolicyKind = "llm" | "level_k" | "synthetic";
export type SystemVariant = "plain" | "rational" | "named" | "roleplay";
export type AnswerMode = "basic" | "cot";

export interface LaunchForm {
  populationId: string;
  name: string;
  preset: RulePreset;
  rounds: string;
  system: SystemVariant;
  user: AnswerMode;
  policy: PolicyKind;
  // llm
  endpointUrl: string;
  /** The variable holding the endpoint's API key on the workers (never the key); blank: none. */
  apiKeyEnv: string;
  model: string;
  server: "openai" | "vllm" | "llama_cpp";
  api: "chat" | "completions";
  maxConcurrency: string;
  /** Prompts per request (a prompt array: completions on vLLM or OpenAI); blank: by server. */
  batchSize: string;
  temperature: string;
  /** Players report whole numbers (the rules say so; the answer constraint allows no decimals). */
  integerAnswers: boolean;
  // level-k
  defaultDepth: string;
  noiseStd: string;
  depthAttribute: string;
  /** category -> depth text, for the categories of depthAttribute; blank uses the default depth. */
  depthByCategory: Record<string, string>;
  // synthetic
  latency: string;
  segmentBy: string[];
  seed: string;
  /** Rounds complete over the hosted agents; agents no live worker hosts count as lost. */
  allowPartial: boolean;
}

export const initialLaunchForm: LaunchForm = {
  populationId: "",
  name: "",
  preset: "2/3",
  rounds: "6",
  system: "plain",
  user: "basic",
  policy: "level_k",
  endpointUrl: "http://127.0.0.1:8081",
  apiKeyEnv: "",
  model: "gemma-3-270m",
  server: "llama_cpp",
  api: "completions",
  maxConcurrency: "",
  batchSize: "",
  temperature: "0.7",
  integerAnswers: false,
  defaultDepth: "1",
  noiseStd: "0",
  depthAttribute: "",
  depthByCategory: {},
  latency: "0",
  segmentBy: [],
  seed: "",
  allowPartial: false,
};

/** A number as typed; text that is not one goes to the manager as is, which names the field. */
function numeric(text: string): number | string {
  const trimmed = text.trim();
  if (trimmed === "") return trimmed;
  const value = Number(trimmed);
  return Number.isFinite(value) ? value : trimmed;
}

function policyOf(form: LaunchForm): Record<string, unknown> {
  switch (form.policy) {
    case "llm": {
      const endpoint: Record<string, unknown> = {
        base_url: form.endpointUrl.trim(),
        model: form.model.trim(),
        server: form.server,
      };
      // Blank: the manager's default total for the server kind.
      if (form.maxConcurrency.trim()) endpoint.max_concurrency = numeric(form.maxConcurrency);
      if (form.batchSize.trim()) endpoint.batch_size = numeric(form.batchSize);
      if (form.apiKeyEnv.trim()) endpoint.api_key_env = form.apiKeyEnv.trim();
      const policy: Record<string, unknown> = { kind: "llm", endpoints: [endpoint], api: form.api, temperature: numeric(form.temperature) };
      if (form.integerAnswers) policy.integer_answers = true;
      return policy;
    }
    case "level_k": {
      const policy: Record<string, unknown> = { kind: "level_k", default_depth: numeric(form.defaultDepth), noise_std: numeric(form.noiseStd) };
      if (form.depthAttribute) {
        policy.depth_attribute = form.depthAttribute;
        policy.depth_by_category = Object.fromEntries(
          Object.entries(form.depthByCategory)
            .filter(([, depth]) => depth.trim() !== "")
            .map(([category, depth]) => [category, numeric(depth)]),
        );
      }
      return policy;
    }
    case "synthetic":
      return { kind: "synthetic", latency_s: numeric(form.latency) };
  }
}

export function launchConfig(form: LaunchForm): Record<string, unknown> {
  const config: Record<string, unknown> = {
    population_id: numeric(form.populationId),
    rounds: numeric(form.rounds),
    rule: { preset: form.preset },
    prompt: { system: form.system, user: form.user },
    policy: policyOf(form),
    segment_by: form.segmentBy,
  };
  if (form.name.trim()) config.name = form.name.trim();
  // Sent as typed: a 64-bit seed does not survive a JavaScript number (the API takes strings).
  if (form.seed.trim()) config.seed = /^\d+$/.test(form.seed.trim()) ? form.seed.trim() : numeric(form.seed);
  if (form.allowPartial) config.allow_partial = true;
  return config;
}

/** The form's fields that can carry an error, each shown next to its control. */
export type LaunchField =
  | "population"
  | "name"
  | "rule"
  | "rounds"
  | "prompt"
  | "policy"
  | "endpoint"
  | "apiKeyEnv"
  | "model"
  | "maxConcurrency"
  | "batchSize"
  | "temperature"
  | "integerAnswers"
  | "defaultDepth"
  | "noiseStd"
  | "depthAttribute"
  | "depthByCategory"
  | "latency"
  | "segmentBy"
  | "seed"
  | "allowPartial"
  | "form";

const POLICY_FIELDS: Readonly<Record<string, LaunchField>> = {
  endpoints: "endpoint",
  model: "model",
  models_by: "model",
  temperature: "temperature",
  integer_answers: "integerAnswers",
  default_depth: "defaultDepth",
  noise_std: "noiseStd",
  depth_attribute: "depthAttribute",
  depth_by_category: "depthByCategory",
  latency_s: "latency",
};

const TOP_FIELDS: Readonly<Record<string, LaunchField>> = {
  population_id: "population",
  name: "name",
  rule: "rule",
  rounds: "rounds",
  prompt: "prompt",
  segment_by: "segmentBy",
  seed: "seed",
  allow_partial: "allowPartial",
};

/** Where a 422 `loc` (["body", "policy", "endpoints", 0, "max_concurrency"], ...) shows in the form. */
export function fieldOf(loc: ReadonlyArray<string | number>): LaunchField {
  const path = loc[0] === "body" ? loc.slice(1) : loc;
  const [head, next] = path;
  if (head === "policy") {
    // A discriminated union puts the kind in the loc: ["policy", "level_k", "noise_std"].
    const rest = typeof next === "string" && ["llm", "level_k", "synthetic"].includes(next) ? path.slice(2) : path.slice(1);
    const [key, , endpointField] = rest;
    if (key === "endpoints" && endpointField === "max_concurrency") return "maxConcurrency";
    if (key === "endpoints" && endpointField === "batch_size") return "batchSize";
    if (key === "endpoints" && endpointField === "model") return "model";
    if (key === "endpoints" && (endpointField === "api_key_env" || endpointField === "api_key")) return "apiKeyEnv";
    if (typeof key === "string" && key in POLICY_FIELDS) return POLICY_FIELDS[key] as LaunchField;
    return "policy";
  }
  if (typeof head === "string" && head in TOP_FIELDS) return TOP_FIELDS[head] as LaunchField;
  return "form";
}

/** The manager's messages per field, in the order it gave them. */
export function issuesByField(issues: readonly ValidationIssue[]): Partial<Record<LaunchField, string[]>> {
  const out: Partial<Record<LaunchField, string[]>> = {};
  for (const issue of issues) {
    const field = fieldOf(issue.loc);
    (out[field] ??= []).push(issue.msg);
  }
  return out;
}
