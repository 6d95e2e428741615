/**
 * The launch form of a plugin other than the guessing game, drawn from what the plugin declares
 * (GET /api/plugins: params_schema, policies and their params_schema): its values, the REST body
 * they make (POST /api/simulations with plugin: {name, params} and policy: {kind, params}), a
 * clone's values from a stored config, and the manager's 422 locs mapped back onto its fields
 * in the form's words. Pure, unit-tested.
 */

import type { ValidationIssue } from "../api/types";
import { type FieldFacts, phraseIssue } from "./formErrors";
import { fieldOf, formFromConfig, initialLlmSettings, type LaunchField, launchLabel, llmMixOf, llmPercent, type LlmSettings, llmPolicyConfig, mixedWithLlm, unmixedLoc } from "./launch";
import { factsOf, initialValues, type JsonSchema, modelSchema, paramsFromValues, type SchemaField, schemaFacts, schemaFields, valuesFromParams } from "./schemaForm";

/** A policy as the plugin declares it (backend/plugins/schemas.py PolicyOut). */
export interface DeclaredPolicy {
  name: string;
  title: string;
  description: string;
  uses_llm: boolean;
  /** Its params' JSON Schema; null for the runtime's own policies (level_k, synthetic, llm). */
  params_schema?: JsonSchema | null;
}

/** A plugin as GET /api/plugins lists it (the parts the form reads). */
export interface DeclaredPlugin {
  name: string;
  title: string;
  description: string;
  params_schema: JsonSchema;
  policies: DeclaredPolicy[];
  default_policy: string | null;
}

/** The plugin the form opens with when the URL names none (or one not installed). */
export const DEFAULT_PLUGIN = "guess";

export function chosenPlugin<T extends { name: string }>(plugins: readonly T[], requested: string | null): string {
  if (requested && plugins.some((p) => p.name === requested)) return requested;
  return plugins.some((p) => p.name === DEFAULT_PLUGIN) || plugins.length === 0 ? DEFAULT_PLUGIN : plugins[0]!.name;
}

export interface PluginForm {
  populationId: string;
  name: string;
  rounds: string;
  seed: string;
  /** The plugin's params as typed, by field key ("endowment", "rule.preset"). */
  params: Record<string, string>;
  policy: string;
  /** Each policy's params as typed, so switching policies back and forth keeps them. */
  policyParams: Record<string, Record<string, string>>;
  segmentBy: string[];
  allowPartial: boolean;
  /** The settings of the runtime's LLM policy, for a plugin that lists it (its prompts are the plugin's). */
  llm: LlmSettings;
  /** Percent of the agents the LLM plays while the rest follow the chosen rule-based policy; blank: none. */
  llmShare: string;
}

/** Whether the form mixes an LLM share into the chosen rule-based policy. */
export function mixesLlm(plugin: DeclaredPlugin, form: PluginForm): boolean {
  const policy = plugin.policies.find((p) => p.name === form.policy);
  return policy !== undefined && !isLlmPolicy(policy) && plugin.policies.some(isLlmPolicy) && llmPercent(form.llmShare) !== null;
}

/** The runtime's LLM policy as a plugin lists it (populace.plugin.llm_policy): no params of its own. */
export function isLlmPolicy(policy: DeclaredPolicy | undefined): boolean {
  return policy !== undefined && policy.name === "llm" && !policy.params_schema;
}

export function paramFields(plugin: DeclaredPlugin): SchemaField[] {
  return schemaFields(plugin.params_schema).fields;
}

export function policyFields(policy: DeclaredPolicy | undefined): SchemaField[] {
  return policy?.params_schema ? schemaFields(policy.params_schema).fields : [];
}

export function initialPluginForm(plugin: DeclaredPlugin, populationId = ""): PluginForm {
  return {
    populationId,
    name: "",
    rounds: "6",
    seed: "",
    params: initialValues(paramFields(plugin)),
    policy: plugin.default_policy ?? plugin.policies[0]?.name ?? "",
    policyParams: Object.fromEntries(plugin.policies.map((p) => [p.name, initialValues(policyFields(p))])),
    segmentBy: [],
    allowPartial: false,
    llm: initialLlmSettings(),
    llmShare: "",
  };
}

/** A number as typed; text that is not one goes as is, and the manager names the field. */
function numeric(text: string): number | string {
  const trimmed = text.trim();
  const value = Number(trimmed);
  return trimmed !== "" && Number.isFinite(value) ? value : trimmed;
}

export function pluginLaunchConfig(plugin: DeclaredPlugin, form: PluginForm): Record<string, unknown> {
  const policy = plugin.policies.find((p) => p.name === form.policy);
  const config: Record<string, unknown> = {
    population_id: numeric(form.populationId),
    rounds: numeric(form.rounds),
    plugin: { name: plugin.name, params: paramsFromValues(paramFields(plugin), form.params) },
    segment_by: form.segmentBy,
  };
  const mixed = mixesLlm(plugin, form);
  if (isLlmPolicy(policy)) {
    config.policy = llmPolicyConfig(form.llm);
  } else if (policy) {
    const params = paramsFromValues(policyFields(policy), form.policyParams[policy.name] ?? {});
    // The runtime's own policies (params_schema null) take their fields in policy itself.
    const rule = policy.params_schema ? { kind: policy.name, params } : { kind: policy.name };
    config.policy = mixed ? mixedWithLlm(rule, llmPolicyConfig(form.llm), llmPercent(form.llmShare) ?? 0) : rule;
  }
  if (isLlmPolicy(policy) || mixed) {
    if (form.llm.agentDeadline.trim()) config.deadlines = { agent_s: numeric(form.llm.agentDeadline) };
    if (form.llm.storeResponses) config.store_responses = true;
  }
  if (form.name.trim()) config.name = form.name.trim();
  // As typed: a 64-bit seed does not survive a JavaScript number (the API takes strings).
  if (form.seed.trim()) config.seed = /^\d+$/.test(form.seed.trim()) ? form.seed.trim() : numeric(form.seed);
  if (form.allowPartial) config.allow_partial = true;
  return config;
}

const asRecord = (value: unknown): Record<string, unknown> => (value && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : {});

/** The form from a run's stored config ("clone"); the seed from the run (a decimal string). */
export function pluginFormFromConfig(plugin: DeclaredPlugin, config: Record<string, unknown>, run: { population_id: number; name: string; seed: string }): PluginForm {
  const form = initialPluginForm(plugin, String(run.population_id));
  const mix = llmMixOf(asRecord(config.policy));
  // A mixed population shows its rule-based part as the policy, and its LLM share.
  const policy = mix ? mix.rule : asRecord(config.policy);
  const kind = plugin.policies.find((p) => p.name === policy.kind);
  const { endpoints, api, temperature, agentDeadline, storeResponses } = formFromConfig(config, run).form;
  return {
    ...form,
    name: run.name,
    rounds: config.rounds === undefined ? form.rounds : String(config.rounds),
    seed: run.seed,
    params: valuesFromParams(paramFields(plugin), asRecord(asRecord(config.plugin).params)),
    policy: kind?.name ?? form.policy,
    policyParams: kind ? { ...form.policyParams, [kind.name]: valuesFromParams(policyFields(kind), asRecord(policy.params)) } : form.policyParams,
    segmentBy: Array.isArray(config.segment_by) ? config.segment_by.map(String) : [],
    allowPartial: config.allow_partial === true,
    llm: isLlmPolicy(kind) || mix ? { endpoints, api, temperature, agentDeadline, storeResponses } : form.llm,
    llmShare: mix ? mix.percent : "",
  };
}

/** The form's fields that can carry an error: the common ones, `param:KEY` and `policyParam:KEY`. */
export type PluginField =
  | "population"
  | "name"
  | "rounds"
  | "seed"
  | "policy"
  | "segmentBy"
  | "allowPartial"
  | "llmShare"
  | "form"
  | `param:${string}`
  | `policyParam:${string}`
  | `llm:${LaunchField}`;

const TOP: Readonly<Record<string, PluginField>> = {
  population_id: "population",
  name: "name",
  rounds: "rounds",
  seed: "seed",
  segment_by: "segmentBy",
  allow_partial: "allowPartial",
};

/** Where a 422 `loc` shows in the form: ["body", "plugin", "params", "multiplier"] → "param:multiplier". */
export function pluginFieldOf(loc: ReadonlyArray<string | number>): PluginField {
  const path = unmixedLoc(loc[0] === "body" ? loc.slice(1) : loc);
  if (path[0] === "llm_share") return "llmShare";
  const [head, next] = path;
  if (head === "plugin" && next === "params" && path.length > 2) return `param:${path.slice(2).join(".")}`;
  if (head === "policy" && next === "params" && path.length > 2) return `policyParam:${path.slice(2).join(".")}`;
  // The LLM policy's own fields (endpoints, temperature, ...), its deadline and stored answers.
  if ((head === "policy" && next !== "kind" && path.length > 1) || head === "deadlines" || head === "store_responses") {
    const field = fieldOf(path);
    if (field !== "policy" && field !== "form") return `llm:${field}`;
  }
  if (head === "policy") return "policy";
  if (typeof head === "string" && head in TOP) return TOP[head]!;
  return "form";
}

/** The labels of the form's common fields, as its controls show them. */
export const COMMON_LABELS: Readonly<Record<string, string>> = {
  population: "Population",
  name: "Name",
  rounds: "Rounds",
  seed: "Seed",
  policy: "Policy",
  segmentBy: "Break statistics down by",
  allowPartial: "Allow partial",
  llmShare: "LLM agents (%)",
};

/** One phrased problem: the field it concerns (null: not a field of the form) and the sentence. */
export interface FieldProblem<F extends string = string> {
  field: F;
  text: string;
}

/**
 * The 422's issues in the form's words, each at its field: a plugin param's range and label from
 * the plugin's schema, a common field's from the manager's config schema (its OpenAPI document;
 * null until loaded, when only the message's own numbers are used).
 */
export function phrasePluginIssues(
  plugin: DeclaredPlugin,
  policy: DeclaredPolicy | undefined,
  issues: readonly ValidationIssue[],
  openapi: JsonSchema | null,
): FieldProblem<PluginField>[] {
  const params = paramFields(plugin);
  const policyParams = policyFields(policy);
  return issues.map((issue) => {
    const field = pluginFieldOf(issue.loc);
    let facts: FieldFacts;
    if (field.startsWith("llm:")) {
      const loc = issue.loc[0] === "body" ? issue.loc.slice(1) : issue.loc;
      const model = openapi ? modelSchema(openapi, "SimulationConfig") : null;
      facts = { ...(openapi && model ? schemaFacts(openapi, model, loc) : {}), label: launchLabel(field.slice(4) as LaunchField) };
    } else if (field.startsWith("param:") || field.startsWith("policyParam:")) {
      const key = field.slice(field.indexOf(":") + 1);
      const list = field.startsWith("param:") ? params : policyParams;
      const known = list.find((f) => f.key === key);
      const schema = field.startsWith("param:") ? plugin.params_schema : (policy?.params_schema ?? {});
      facts = known ? factsOf(known) : { label: key, ...schemaFacts(schema, schema, key.split(".")) };
    } else {
      const loc = (issue.loc[0] === "body" ? issue.loc.slice(1) : issue.loc).filter((p) => p !== "body");
      const model = openapi ? modelSchema(openapi, "SimulationConfig") : null;
      const fromSchema = openapi && model ? schemaFacts(openapi, model, loc) : {};
      facts = { ...fromSchema, label: COMMON_LABELS[field] ?? loc.join(".") };
      if (field === "form") facts.label = loc.join(".");
    }
    return { field, text: phraseIssue(issue, facts) };
  });
}

/**
 * Where an older launch link of the runs page leads now: "/simulations?launch&population=3"
 * → "/simulations/new?population=3", "?clone=5" → "/simulations/new?clone=5"; null for a
 * runs-table URL.
 */
export function launchPageHref(search: string): string | null {
  const old = new URLSearchParams(search);
  if (!old.has("launch") && !old.has("clone")) return null;
  const params = new URLSearchParams();
  for (const name of ["plugin", "population", "clone"]) {
    const value = old.get(name);
    if (value) params.set(name, value);
  }
  const query = params.toString();
  return `/simulations/new${query ? `?${query}` : ""}`;
}
