import type { ValidationIssue } from "../api/types";
import {
  APIS,
  DEFAULT_AGENT_DEADLINE_S,
  DEFAULT_BATCH_SIZE,
  DEFAULT_SERVER,
  DEFAULT_TEMPERATURE,
  DEFAULT_TOTAL_CONCURRENCY,
  POLICY_KINDS,
  RULE_PRESETS,
  SERVERS,
  SYSTEM_PROMPTS,
  USER_PROMPTS,
} from "../generated/rules";
import { type FieldFacts, phraseIssue } from "./formErrors";
import { type JsonSchema, modelSchema, schemaFacts } from "./schemaForm";
import { guessParams, type RulePreset } from "./simulations";

/**
 * The launch form: its values, the simulation config they make (the REST body the manager
 * validates, backend/simulations/config.py), and the manager's 422 locs mapped back onto the
 * form's fields. Pure, so the mapping is unit-tested. The choices, defaults and limits are the
 * Python's (generated/rules.ts, written by scripts/gen_rules.py): no copies here.
 */

export type PolicyKind = (typeof POLICY_KINDS)[number];
export type SystemVariant = (typeof SYSTEM_PROMPTS)[number];
export type AnswerMode = (typeof USER_PROMPTS)[number];
export type ServerKind = (typeof SERVERS)[number];
export type ApiKind = (typeof APIS)[number];

/** The form's label of each server kind, in the order the select offers them. */
export const SERVER_LABELS: Readonly<Record<ServerKind, string>> = { openai: "OpenAI-compatible", vllm: "vLLM", llama_cpp: "llama.cpp" };

/** "by server: vllm 256, openai 64, llama_cpp 2": a blank field's default, as the manager fills it. */
export function byServerText(defaults: Readonly<Record<ServerKind, number>>): string {
  return `by server: ${Object.entries(defaults)
    .map(([server, value]) => `${server} ${value}`)
    .join(", ")}`;
}

export const concurrencyPlaceholder = byServerText(DEFAULT_TOTAL_CONCURRENCY);
export const batchSizePlaceholder = byServerText(DEFAULT_BATCH_SIZE);
/** The agent deadline a blank field leaves (the manager's default), in seconds. */
export const defaultAgentDeadline = DEFAULT_AGENT_DEADLINE_S;

const isOneOf = <T extends string>(choices: readonly T[], value: unknown): value is T => choices.some((c) => c === value);

/** One LLM endpoint row of the form (the policy takes several; agents are spread over them). */
export interface EndpointRow {
  baseUrl: string;
  model: string;
  server: ServerKind;
  /** The variable holding the endpoint's API key on the workers (never the key); blank: none. */
  apiKeyEnv: string;
  /** Requests in flight in total over all workers; blank: the manager's default by server. */
  maxConcurrency: string;
  /** Prompts per request (a prompt array: completions on vLLM or OpenAI); blank: by server. */
  batchSize: string;
  /** US dollars per million tokens, for cost estimates; both blank: no price. */
  pricePrompt: string;
  priceCompletion: string;
}

export interface LaunchForm {
  populationId: string;
  name: string;
  preset: RulePreset;
  rounds: string;
  // The prompt applies to the LLM policy only (level-k and synthetic agents read none).
  system: SystemVariant;
  user: AnswerMode;
  policy: PolicyKind;
  // llm
  endpoints: EndpointRow[];
  api: ApiKind;
  temperature: string;
  /** Players report whole numbers (the rules say so; the answer constraint allows no decimals). */
  integerAnswers: boolean;
  /** Tell agents the previous round's mean too, not only the winning number. */
  feedbackMean: boolean;
  /** Seconds for one agent's answer, retries included; blank: the manager's DEFAULT_AGENT_DEADLINE_S. */
  agentDeadline: string;
  /** Keep every LLM answer's text (transcripts). */
  storeResponses: boolean;
  // level-k
  defaultDepth: string;
  noiseStd: string;
  depthAttribute: string;
  /** category -> depth text, for the categories of depthAttribute; blank uses the default depth. */
  depthByCategory: Record<string, string>;
  // synthetic
  latency: string;
  /** Percent of the agents the LLM plays while the rest follow level-k or synthetic (a mixed policy); blank or 0: none. */
  llmShare: string;
  // any policy
  /** Seconds for the whole round on each worker; blank: no limit. */
  roundDeadline: string;
  segmentBy: string[];
  seed: string;
  /** Rounds complete over the hosted agents; agents no live worker hosts count as lost. */
  allowPartial: boolean;
}

/** The LLM policy's settings any plugin's form shares (components/LlmPolicyFields.tsx). */
export type LlmSettings = Pick<LaunchForm, "endpoints" | "api" | "temperature" | "agentDeadline" | "storeResponses">;

export const initialLlmSettings = (): LlmSettings => ({ endpoints: [newEndpointRow], api: "completions", temperature: String(DEFAULT_TEMPERATURE), agentDeadline: "", storeResponses: false });

/**
 * A mixed population: `percent` of the agents played by the LLM policy, the rest by the
 * rule-based one (POST /api/simulations policy: {kind: mixed, shares}). The manager draws who
 * plays which from the run's seed, with exact counts.
 */
export function mixedWithLlm(rule: Record<string, unknown>, llm: Record<string, unknown>, percent: number): Record<string, unknown> {
  const share = percent / 100;
  return {
    kind: "mixed",
    shares: [
      { share, policy: llm },
      { share: Number((1 - share).toFixed(12)), policy: rule },
    ],
  };
}

/** The percent typed, when it mixes an LLM share in (a number in (0, 100)); null otherwise. */
export function llmPercent(text: string): number | null {
  const value = Number(text.trim());
  return text.trim() !== "" && Number.isFinite(value) && value > 0 && value < 100 ? value : null;
}

/** A stored mixed policy the form can show again (an LLM share, then one rule-based part). */
export function llmMixOf(policy: Record<string, unknown>): { percent: string; llm: Record<string, unknown>; rule: Record<string, unknown> } | null {
  if (policy.kind !== "mixed" || !Array.isArray(policy.shares) || policy.shares.length !== 2) return null;
  const [first, second] = policy.shares.map(asRecord);
  const llm = asRecord(first?.policy);
  if (llm.kind !== "llm" || typeof first?.share !== "number") return null;
  return { percent: String(Number((first.share * 100).toFixed(9))), llm, rule: asRecord(second?.policy) };
}

/**
 * A 422 loc inside the mixed policy the form builds, as the loc of the part's own policy:
 * ["policy", "mixed", "shares", 0, "policy", "llm", "temperature"] → ["policy", "llm",
 * "temperature"]; the shares themselves → ["llm_share"].
 */
export function unmixedLoc(path: ReadonlyArray<string | number>): ReadonlyArray<string | number> {
  if (path[0] !== "policy") return path;
  const rest = path[1] === "mixed" ? path.slice(2) : path.slice(1);
  if (rest[0] !== "shares") return path;
  if (typeof rest[1] === "number" && rest[2] === "policy") return ["policy", ...rest.slice(3)];
  return ["llm_share"];
}

/** The LLM policy ({kind: "llm", endpoints, api, temperature}) of the settings. */
export function llmPolicyConfig(settings: LlmSettings): Record<string, unknown> {
  return { kind: "llm", endpoints: settings.endpoints.map(endpointConfig), api: settings.api, temperature: numeric(settings.temperature) };
}

export const newEndpointRow: EndpointRow = {
  baseUrl: "http://127.0.0.1:8081",
  model: "gemma-3-270m",
  server: "llama_cpp",
  apiKeyEnv: "",
  maxConcurrency: "",
  batchSize: "",
  pricePrompt: "",
  priceCompletion: "",
};

export const initialLaunchForm: LaunchForm = {
  populationId: "",
  name: "",
  preset: "2/3",
  rounds: "6",
  system: "plain",
  user: "basic",
  policy: "level_k",
  endpoints: [newEndpointRow],
  api: "completions",
  temperature: String(DEFAULT_TEMPERATURE),
  integerAnswers: false,
  feedbackMean: false,
  agentDeadline: "",
  storeResponses: false,
  defaultDepth: "1",
  noiseStd: "0",
  depthAttribute: "",
  depthByCategory: {},
  latency: "0",
  llmShare: "",
  roundDeadline: "",
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

/** An endpoint as the config (and POST /api/llm/test) takes it. */
export function endpointConfig(row: EndpointRow): Record<string, unknown> {
  const endpoint: Record<string, unknown> = { base_url: row.baseUrl.trim(), model: row.model.trim(), server: row.server };
  // Blank: the manager's default total for the server kind.
  if (row.maxConcurrency.trim()) endpoint.max_concurrency = numeric(row.maxConcurrency);
  if (row.batchSize.trim()) endpoint.batch_size = numeric(row.batchSize);
  if (row.apiKeyEnv.trim()) endpoint.api_key_env = row.apiKeyEnv.trim();
  if (row.pricePrompt.trim() || row.priceCompletion.trim()) {
    endpoint.price = { prompt_per_million: numeric(row.pricePrompt || "0"), completion_per_million: numeric(row.priceCompletion || "0") };
  }
  return endpoint;
}

function llmOf(form: LaunchForm): Record<string, unknown> {
  const policy = llmPolicyConfig(form);
  if (form.integerAnswers) policy.integer_answers = true;
  return policy;
}

function policyOf(form: LaunchForm): Record<string, unknown> {
  switch (form.policy) {
    case "llm":
      return llmOf(form);
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
  const percent = form.policy === "llm" ? null : llmPercent(form.llmShare);
  // A mixed population asks the LLM too: its prompt, answers and deadline apply.
  const llm = form.policy === "llm" || percent !== null;
  // The guessing game, named as the plugin that plays (GET /api/plugins/guess).
  const params: Record<string, unknown> = { rule: { preset: form.preset } };
  const config: Record<string, unknown> = {
    population_id: numeric(form.populationId),
    rounds: numeric(form.rounds),
    plugin: { name: "guess", params },
    policy: percent === null ? policyOf(form) : mixedWithLlm(policyOf(form), llmOf(form), percent),
    segment_by: form.segmentBy,
  };
  // Only what applies: a level-k or synthetic run reads no prompt and stores no responses.
  if (llm) config.prompt = { system: form.system, user: form.user };
  if (llm && form.feedbackMean) params.feedback = { mean: true };
  if (llm && form.storeResponses) config.store_responses = true;
  const deadlines: Record<string, unknown> = {};
  if (llm && form.agentDeadline.trim()) deadlines.agent_s = numeric(form.agentDeadline);
  if (form.roundDeadline.trim()) deadlines.round_s = numeric(form.roundDeadline);
  if (Object.keys(deadlines).length > 0) config.deadlines = deadlines;
  if (form.name.trim()) config.name = form.name.trim();
  // Sent as typed: a 64-bit seed does not survive a JavaScript number (the API takes strings).
  if (form.seed.trim()) config.seed = /^\d+$/.test(form.seed.trim()) ? form.seed.trim() : numeric(form.seed);
  if (form.allowPartial) config.allow_partial = true;
  return config;
}

const text = (value: unknown): string => (value === null || value === undefined ? "" : String(value));
const asRecord = (value: unknown): Record<string, unknown> => (value && typeof value === "object" ? (value as Record<string, unknown>) : {});

/**
 * The form filled from a run's stored config, for "clone": every field the form has. The seed
 * comes from the run (a decimal string: the stored config's number may exceed 2^53). A rule
 * without a preset (a custom ratio) and prompt templates of one's own are not form fields:
 * the preset falls back to 2/3 and `unsupported` lists what was dropped.
 */
export function formFromConfig(
  config: Record<string, unknown>,
  run: { population_id: number; name: string; seed: string },
  base: LaunchForm = initialLaunchForm,
): { form: LaunchForm; unsupported: string[] } {
  const unsupported: string[] = [];
  const game = guessParams(config);
  const rule = asRecord(game.rule);
  const prompt = asRecord(config.prompt);
  const mix = llmMixOf(asRecord(config.policy));
  // A mixed population shows its rule-based part as the policy and its LLM part's settings.
  const policy = mix ? mix.rule : asRecord(config.policy);
  const llmPolicy = mix ? mix.llm : policy;
  const deadlines = asRecord(config.deadlines);
  const kind = isOneOf(POLICY_KINDS, policy.kind) ? policy.kind : base.policy;
  const asksLlm = kind === "llm" || mix !== null;
  const preset: RulePreset | undefined = isOneOf(RULE_PRESETS, rule.preset) ? rule.preset : undefined;
  if (!preset) unsupported.push("a rule without a preset");
  if (prompt.system_template || prompt.user_template) unsupported.push("prompt templates");
  const endpoints = Array.isArray(llmPolicy.endpoints)
    ? llmPolicy.endpoints.map((raw): EndpointRow => {
        const e = asRecord(raw);
        const price = asRecord(e.price);
        const server = isOneOf(SERVERS, e.server) ? e.server : DEFAULT_SERVER;
        return {
          baseUrl: text(e.base_url),
          model: text(e.model),
          server,
          apiKeyEnv: text(e.api_key_env),
          maxConcurrency: text(e.max_concurrency),
          batchSize: text(e.batch_size),
          pricePrompt: e.price ? text(price.prompt_per_million) : "",
          priceCompletion: e.price ? text(price.completion_per_million) : "",
        };
      })
    : base.endpoints;
  const depths = asRecord(policy.depth_by_category);
  const form: LaunchForm = {
    ...base,
    populationId: String(run.population_id),
    name: run.name,
    preset: preset ?? base.preset,
    rounds: text(config.rounds) || base.rounds,
    system: isOneOf(SYSTEM_PROMPTS, prompt.system) ? prompt.system : base.system,
    user: isOneOf(USER_PROMPTS, prompt.user) ? prompt.user : "basic",
    policy: kind,
    endpoints: endpoints.length > 0 ? endpoints : base.endpoints,
    api: llmPolicy.api === "chat" ? "chat" : asksLlm ? "completions" : base.api,
    temperature: asksLlm ? text(llmPolicy.temperature) : base.temperature,
    integerAnswers: llmPolicy.integer_answers === true,
    feedbackMean: asRecord(game.feedback).mean === true,
    agentDeadline: asksLlm && deadlines.agent_s !== undefined ? text(deadlines.agent_s) : "",
    storeResponses: config.store_responses === true,
    defaultDepth: kind === "level_k" ? text(policy.default_depth) : base.defaultDepth,
    noiseStd: kind === "level_k" ? text(policy.noise_std) : base.noiseStd,
    depthAttribute: text(policy.depth_attribute),
    depthByCategory: Object.fromEntries(Object.entries(depths).map(([k, v]) => [k, text(v)])),
    latency: kind === "synthetic" ? text(policy.latency_s) : base.latency,
    llmShare: mix ? mix.percent : "",
    roundDeadline: text(deadlines.round_s),
    segmentBy: Array.isArray(config.segment_by) ? config.segment_by.map(text) : [],
    seed: run.seed,
    allowPartial: config.allow_partial === true,
  };
  return { form, unsupported };
}

/** What POST /api/simulations/estimate answers for a config. */
export interface LaunchEstimate {
  agents: number;
  /** Agents the LLM answers: all, or its part's of a mixed policy. */
  llm_agents?: number;
  rounds: number;
  requests: number;
  prompt_tokens: number;
  completion_tokens: number;
  cost_usd: number | null;
}

/** "6 rounds × 1,000 agents: about 6,000 requests, 1.2 M prompt + 96 k completion tokens, ≈ $0.42" */
export function estimateText(e: LaunchEstimate): string {
  const n = (x: number) => x.toLocaleString("en-US");
  const tokens = (x: number) => (x >= 1e6 ? `${(x / 1e6).toFixed(1)} M` : x >= 1e4 ? `${Math.round(x / 1e3)} k` : n(x));
  // A mixed population: the LLM asks for its part's agents alone.
  const llmPart = e.llm_agents !== undefined && e.llm_agents > 0 && e.llm_agents < e.agents ? ` (${n(e.llm_agents)} of them LLM agents)` : "";
  const parts = [`${n(e.rounds)} rounds × ${n(e.agents)} agents${llmPart}`];
  const load = e.requests > 0 ? `about ${n(e.requests)} LLM requests, ${tokens(e.prompt_tokens)} prompt + ${tokens(e.completion_tokens)} completion tokens` : "no LLM requests";
  const cost = e.cost_usd === null ? "no price given" : `≈ $${e.cost_usd < 0.01 && e.cost_usd > 0 ? e.cost_usd.toFixed(4) : e.cost_usd.toFixed(2)}`;
  return `${parts[0]}: ${load}; ${cost}`;
}

/** One endpoint's answer of POST /api/llm/test. */
export interface EndpointProbe {
  base_url: string;
  ok: boolean;
  models: string[];
  error: string | null;
}

/** "OK: serves gemma-3-270m" / "OK, but gemma is not among its models (a, b)" / the error. */
export function probeText(probe: EndpointProbe, model: string): { ok: boolean; text: string } {
  if (!probe.ok) return { ok: false, text: `Failed: ${probe.error ?? "no answer"}` };
  if (probe.models.length === 0) return { ok: true, text: "Reachable (it lists no models)" };
  if (model && !probe.models.includes(model)) return { ok: false, text: `Reachable, but it does not list ${model} (it lists ${probe.models.join(", ")})` };
  return { ok: true, text: `Reachable: serves ${probe.models.join(", ")}` };
}

type EndpointFieldName = "baseUrl" | "model" | "apiKeyEnv" | "maxConcurrency" | "batchSize" | "price";

/** The form's fields that can carry an error, each shown next to its control; an endpoint row's
 * are `endpoints.<row>.<field>`. */
export type LaunchField =
  | "population"
  | "name"
  | "rule"
  | "rounds"
  | "prompt"
  | "policy"
  | "endpoints"
  | `endpoints.${number}.${EndpointFieldName}`
  | "temperature"
  | "integerAnswers"
  | "feedback"
  | "agentDeadline"
  | "roundDeadline"
  | "storeResponses"
  | "defaultDepth"
  | "noiseStd"
  | "depthAttribute"
  | "depthByCategory"
  | "latency"
  | "llmShare"
  | "segmentBy"
  | "seed"
  | "allowPartial"
  | "form";

const POLICY_FIELDS: Readonly<Record<string, LaunchField>> = {
  endpoints: "endpoints",
  temperature: "temperature",
  integer_answers: "integerAnswers",
  default_depth: "defaultDepth",
  noise_std: "noiseStd",
  depth_attribute: "depthAttribute",
  depth_by_category: "depthByCategory",
  latency_s: "latency",
};

const ENDPOINT_FIELDS: Readonly<Record<string, EndpointFieldName>> = {
  base_url: "baseUrl",
  model: "model",
  api_key_env: "apiKeyEnv",
  api_key: "apiKeyEnv",
  max_concurrency: "maxConcurrency",
  batch_size: "batchSize",
  price: "price",
};

const TOP_FIELDS: Readonly<Record<string, LaunchField>> = {
  population_id: "population",
  name: "name",
  rule: "rule",
  rounds: "rounds",
  prompt: "prompt",
  feedback: "feedback",
  store_responses: "storeResponses",
  segment_by: "segmentBy",
  seed: "seed",
  allow_partial: "allowPartial",
};

/** Where a 422 `loc` (["body", "policy", "endpoints", 0, "max_concurrency"], ...) shows in the form. */
export function fieldOf(loc: ReadonlyArray<string | number>): LaunchField {
  let path = unmixedLoc(loc[0] === "body" ? loc.slice(1) : loc);
  if (path[0] === "llm_share") return "llmShare";
  // The game's params (plugin.params.rule, ...) show where the older top-level fields did.
  if (path[0] === "plugin" && path[1] === "params" && path.length > 2) path = path.slice(2);
  else if (path[0] === "plugin") return "form";
  const [head, next] = path;
  if (head === "policy") {
    // A discriminated union puts the kind in the loc: ["policy", "level_k", "noise_std"].
    const rest = isOneOf(POLICY_KINDS, next) ? path.slice(2) : path.slice(1);
    const [key, row, endpointField] = rest;
    if (key === "endpoints" && typeof row === "number") {
      const field = typeof endpointField === "string" ? ENDPOINT_FIELDS[endpointField] : undefined;
      return field ? `endpoints.${row}.${field}` : `endpoints.${row}.baseUrl`;
    }
    if (typeof key === "string" && key in POLICY_FIELDS) return POLICY_FIELDS[key] as LaunchField;
    return "policy";
  }
  if (head === "deadlines") return next === "agent_s" ? "agentDeadline" : "roundDeadline";
  if (typeof head === "string" && head in TOP_FIELDS) return TOP_FIELDS[head] as LaunchField;
  return "form";
}

/** The label each field's control shows, for the messages (an endpoint row's: "Endpoint 2 URL"). */
const LAUNCH_LABELS: Readonly<Record<string, string>> = {
  population: "Population",
  name: "Name",
  rule: "Rule",
  rounds: "Rounds",
  prompt: "System prompt",
  policy: "Policy",
  endpoints: "Endpoints",
  temperature: "Temperature",
  integerAnswers: "Whole numbers only",
  feedback: "Tell agents last round's mean too",
  agentDeadline: "Deadline per answer",
  roundDeadline: "Deadline per round",
  storeResponses: "Store responses",
  defaultDepth: "Default depth",
  noiseStd: "Noise (std)",
  depthAttribute: "Depth by attribute",
  depthByCategory: "Depth by category",
  latency: "Latency per agent",
  llmShare: "LLM agents (%)",
  segmentBy: "Break statistics down by",
  seed: "Seed",
  allowPartial: "Allow partial",
};

const ENDPOINT_LABELS: Readonly<Record<EndpointFieldName, string>> = {
  baseUrl: "URL",
  model: "model",
  apiKeyEnv: "API key variable",
  maxConcurrency: "max concurrency",
  batchSize: "prompts per request",
  price: "price",
};

export function launchLabel(field: LaunchField): string {
  const row = /^endpoints\.(\d+)\.(\w+)$/.exec(field);
  if (row) return `Endpoint ${Number(row[1]) + 1} ${ENDPOINT_LABELS[row[2] as EndpointFieldName] ?? row[2]}`;
  return LAUNCH_LABELS[field] ?? field;
}

/**
 * The 422's issues in the form's words ("Rounds must be between 1 and 1,000"), each at its
 * field, the range and keys from the manager's config schema (its OpenAPI document; null until
 * loaded, when the message's own numbers are used). A problem at no field of the form is
 * labelled by its place in the config.
 */
export function phraseLaunchIssues(issues: readonly ValidationIssue[], openapi: JsonSchema | null): { field: LaunchField; text: string }[] {
  const model = openapi ? modelSchema(openapi, "SimulationConfig") : null;
  return issues.map((issue) => {
    const field = fieldOf(issue.loc);
    const loc = issue.loc[0] === "body" ? issue.loc.slice(1) : issue.loc;
    const facts: FieldFacts = { ...(openapi && model ? schemaFacts(openapi, model, loc) : {}), label: field === "form" ? loc.join(".") : launchLabel(field) };
    return { field, text: phraseIssue(issue, facts) };
  });
}
