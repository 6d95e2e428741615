import { describe, expect, it } from "vitest";
import { DEFAULT_TOTAL_CONCURRENCY, SERVERS } from "../generated/rules";
import { SERVER_LABELS, batchSizePlaceholder, concurrencyPlaceholder, estimateText, fieldOf, formFromConfig, initialLaunchForm, launchConfig, newEndpointRow, phraseLaunchIssues, probeText } from "./launch";

describe("launchConfig", () => {
  it("makes the level-k body the manager expects", () => {
    const config = launchConfig({
      ...initialLaunchForm,
      populationId: "4",
      preset: "1/2+5",
      rounds: "6",
      policy: "level_k",
      defaultDepth: "1",
      noiseStd: "0.5",
      segmentBy: ["education"],
      seed: "11",
    });
    expect(config).toEqual({
      population_id: 4,
      rounds: 6,
      plugin: { name: "guess", params: { rule: { preset: "1/2+5" } } },
      // No prompt: level-k agents read none (the form shows no prompt fields for it).
      policy: { kind: "level_k", default_depth: 1, noise_std: 0.5 },
      segment_by: ["education"],
      seed: "11",
    });
  });

  it("sends depths by category without the blank ones", () => {
    const config = launchConfig({
      ...initialLaunchForm,
      populationId: "1",
      depthAttribute: "education",
      depthByCategory: { doctorate: "3", "high school": "", bachelor: "1" },
    });
    expect(config.policy).toEqual({
      kind: "level_k",
      default_depth: 1,
      noise_std: 0,
      depth_attribute: "education",
      depth_by_category: { doctorate: 3, bachelor: 1 },
    });
  });

  it("makes LLM and synthetic policies, and leaves text that is no number for the manager to name", () => {
    const llmForm = { ...initialLaunchForm, populationId: "1", policy: "llm" as const };
    const llm = launchConfig({ ...llmForm, endpoints: [{ ...newEndpointRow, maxConcurrency: "lots" }], name: "  run  " });
    expect(llm.policy).toEqual({
      kind: "llm",
      endpoints: [{ base_url: "http://127.0.0.1:8081", model: "gemma-3-270m", server: "llama_cpp", max_concurrency: "lots" }],
      api: "completions",
      temperature: 0.7,
    });
    expect(llm.prompt).toEqual({ system: "plain", user: "basic" });
    expect(llm.name).toBe("run");
    const keyed = launchConfig({ ...llmForm, endpoints: [{ ...newEndpointRow, apiKeyEnv: " OPENAI_API_KEY " }] });
    expect((keyed.policy as { endpoints: Record<string, unknown>[] }).endpoints[0]).toMatchObject({ api_key_env: "OPENAI_API_KEY" });
    expect("api_key_env" in (llm.policy as { endpoints: Record<string, unknown>[] }).endpoints[0]!).toBe(false);
    // A blank concurrency leaves the total to the manager's default for the server kind.
    const byDefault = launchConfig(llmForm);
    const first = (byDefault.policy as { endpoints: Record<string, unknown>[] }).endpoints[0]!;
    expect("max_concurrency" in first || "batch_size" in first || "price" in first).toBe(false);
    expect("integer_answers" in (byDefault.policy as Record<string, unknown>)).toBe(false);
    expect("deadlines" in byDefault || "feedback" in byDefault || "store_responses" in byDefault).toBe(false);
    expect(byDefault.plugin).toEqual({ name: "guess", params: { rule: { preset: initialLaunchForm.preset } } });
    const whole = launchConfig({ ...llmForm, integerAnswers: true });
    expect(whole.policy).toMatchObject({ integer_answers: true });
    const batched = launchConfig({ ...llmForm, endpoints: [{ ...newEndpointRow, server: "vllm", batchSize: "32" }] });
    expect((batched.policy as { endpoints: Record<string, unknown>[] }).endpoints[0]).toMatchObject({ batch_size: 32 });
    expect(launchConfig({ ...initialLaunchForm, populationId: "1", policy: "synthetic", latency: "1.5" }).policy).toEqual({
      kind: "synthetic",
      latency_s: 1.5,
    });
    expect(launchConfig({ ...initialLaunchForm, rounds: "" }).rounds).toBe("");
    expect("seed" in launchConfig(initialLaunchForm)).toBe(false);
  });

  it("sends several endpoints with prices, deadlines, feedback and stored responses", () => {
    const config = launchConfig({
      ...initialLaunchForm,
      populationId: "2",
      policy: "llm",
      endpoints: [
        { ...newEndpointRow, pricePrompt: "0.15", priceCompletion: "0.6" },
        { ...newEndpointRow, baseUrl: "https://api.example/v1", model: "m2", server: "openai", apiKeyEnv: "KEY", pricePrompt: "1" },
      ],
      feedbackMean: true,
      storeResponses: true,
      agentDeadline: "20",
      roundDeadline: "600",
    });
    const endpoints = (config.policy as { endpoints: Record<string, unknown>[] }).endpoints;
    expect(endpoints).toHaveLength(2);
    expect(endpoints[0]!.price).toEqual({ prompt_per_million: 0.15, completion_per_million: 0.6 });
    expect(endpoints[1]).toMatchObject({ base_url: "https://api.example/v1", model: "m2", api_key_env: "KEY", price: { prompt_per_million: 1, completion_per_million: 0 } });
    expect(config).toMatchObject({ plugin: { params: { feedback: { mean: true } } }, store_responses: true, deadlines: { agent_s: 20, round_s: 600 } });
    // A level-k run keeps only the deadline that applies to it.
    const levelK = launchConfig({ ...initialLaunchForm, populationId: "2", feedbackMean: true, storeResponses: true, agentDeadline: "20", roundDeadline: "60" });
    expect(levelK.deadlines).toEqual({ round_s: 60 });
    expect("store_responses" in levelK || "prompt" in levelK).toBe(false);
    expect(levelK.plugin).toEqual({ name: "guess", params: { rule: { preset: initialLaunchForm.preset } } });
  });
});

describe("clone", () => {
  it("reads the guessing game's params from plugin.params as from the older top-level fields", () => {
    const base = { rounds: 3, prompt: { system: "plain", user: "basic" }, policy: { kind: "synthetic" } };
    const rule = { preset: "51/100", ratio: null, offset: null, min: 0, max: 100 };
    const run = { population_id: 1, name: "n", seed: "5" };
    const named = formFromConfig({ ...base, plugin: { name: "guess", params: { rule, feedback: { mean: true } } } }, run).form;
    const older = formFromConfig({ ...base, rule, feedback: { mean: true } }, run).form;
    expect(named).toEqual(older);
    expect(named).toMatchObject({ preset: "51/100", feedbackMean: true });
  });

  it("fills every field from a stored config and takes the seed as a string", () => {
    const stored = {
      population_id: 3,
      name: "orig",
      rounds: 4,
      rule: { preset: "1/2+5", ratio: null, offset: null, min: 0, max: 100 },
      prompt: { system: "roleplay", user: "cot", system_template: null, user_template: null },
      feedback: { mean: true },
      policy: {
        kind: "llm",
        endpoints: [
          { base_url: "http://a:1", model: "m", server: "vllm", max_concurrency: 8, batch_size: 4, api_key_env: null, price: { prompt_per_million: 0.1, completion_per_million: 0.2 } },
          { base_url: "http://b:2", model: "m", server: "openai", max_concurrency: null, batch_size: null, api_key_env: "K", price: null },
        ],
        api: "completions",
        temperature: 0,
        integer_answers: true,
      },
      deadlines: { agent_s: 12, round_s: null },
      segment_by: ["education"],
      seed: 9007199254740993,
      store_responses: true,
      allow_partial: true,
    };
    const { form, unsupported } = formFromConfig(stored, { population_id: 3, name: "orig", seed: "9007199254740993" });
    expect(unsupported).toEqual([]);
    expect(form).toMatchObject({
      populationId: "3",
      name: "orig",
      rounds: "4",
      preset: "1/2+5",
      system: "roleplay",
      user: "cot",
      policy: "llm",
      api: "completions",
      temperature: "0",
      integerAnswers: true,
      feedbackMean: true,
      agentDeadline: "12",
      roundDeadline: "",
      storeResponses: true,
      segmentBy: ["education"],
      seed: "9007199254740993",
      allowPartial: true,
    });
    expect(form.endpoints).toEqual([
      { baseUrl: "http://a:1", model: "m", server: "vllm", apiKeyEnv: "", maxConcurrency: "8", batchSize: "4", pricePrompt: "0.1", priceCompletion: "0.2" },
      { baseUrl: "http://b:2", model: "m", server: "openai", apiKeyEnv: "K", maxConcurrency: "", batchSize: "", pricePrompt: "", priceCompletion: "" },
    ]);
    // The clone launches what the original ran (the seed exactly).
    const again = launchConfig(form);
    expect(again).toMatchObject({ population_id: 3, rounds: 4, seed: "9007199254740993", deadlines: { agent_s: 12 }, store_responses: true });
  });

  it("says what the form cannot carry", () => {
    const { form, unsupported } = formFromConfig(
      { rounds: 2, rule: { preset: null, ratio: 0.7 }, prompt: { user_template: "x {persona}" }, policy: { kind: "level_k", default_depth: 2, noise_std: 1, depth_by_category: { a: 3 }, depth_attribute: "edu" } },
      { population_id: 1, name: "n", seed: "5" },
    );
    expect(unsupported).toEqual(["a rule without a preset", "prompt templates"]);
    expect(form).toMatchObject({ policy: "level_k", defaultDepth: "2", noiseStd: "1", depthAttribute: "edu", depthByCategory: { a: "3" } });
  });
});

describe("estimate and connection test texts", () => {
  it("summarizes the estimate", () => {
    expect(estimateText({ agents: 1000, rounds: 6, requests: 6000, prompt_tokens: 1_200_000, completion_tokens: 96_000, cost_usd: 0.4187 })).toBe(
      "6 rounds × 1,000 agents: about 6,000 LLM requests, 1.2 M prompt + 96 k completion tokens; ≈ $0.42",
    );
    expect(estimateText({ agents: 10, rounds: 2, requests: 0, prompt_tokens: 0, completion_tokens: 0, cost_usd: null })).toBe(
      "2 rounds × 10 agents: no LLM requests; no price given",
    );
  });

  it("says whether the endpoint serves the model", () => {
    expect(probeText({ base_url: "u", ok: true, models: ["a", "b"], error: null }, "a")).toEqual({ ok: true, text: "Reachable: serves a, b" });
    expect(probeText({ base_url: "u", ok: true, models: ["a"], error: null }, "z").ok).toBe(false);
    expect(probeText({ base_url: "u", ok: false, models: [], error: "connection refused" }, "a")).toEqual({ ok: false, text: "Failed: connection refused" });
  });
});

describe("allow partial", () => {
  it("goes to the manager only when asked for", () => {
    expect("allow_partial" in launchConfig({ ...initialLaunchForm, populationId: "1" })).toBe(false);
    expect(launchConfig({ ...initialLaunchForm, populationId: "1", allowPartial: true }).allow_partial).toBe(true);
  });
});

describe("fieldOf", () => {
  it.each([
    [["body", "rounds"], "rounds"],
    [["body", "population_id"], "population"],
    [["body", "rule", "max"], "rule"],
    [["body", "plugin", "params", "rule", "max"], "rule"],
    [["body", "plugin", "params", "feedback", "mean"], "feedback"],
    [["body", "plugin", "name"], "form"],
    [["body", "policy"], "policy"],
    [["body", "policy", "level_k", "noise_std"], "noiseStd"],
    [["body", "policy", "level_k", "depth_by_category", "doctorate"], "depthByCategory"],
    [["body", "policy", "llm", "endpoints", 0, "base_url"], "endpoints.0.baseUrl"],
    [["body", "policy", "llm", "endpoints", 1, "max_concurrency"], "endpoints.1.maxConcurrency"],
    [["body", "policy", "llm", "endpoints", 0, "batch_size"], "endpoints.0.batchSize"],
    [["body", "policy", "llm", "endpoints", 2, "model"], "endpoints.2.model"],
    [["body", "policy", "llm", "endpoints", 0, "api_key_env"], "endpoints.0.apiKeyEnv"],
    [["body", "policy", "llm", "endpoints", 0, "api_key"], "endpoints.0.apiKeyEnv"],
    [["body", "policy", "llm", "endpoints", 0, "price", "prompt_per_million"], "endpoints.0.price"],
    [["body", "policy", "llm", "endpoints"], "endpoints"],
    [["body", "policy", "llm", "model"], "policy"],
    [["body", "deadlines", "agent_s"], "agentDeadline"],
    [["body", "deadlines", "round_s"], "roundDeadline"],
    [["body", "feedback", "mean"], "feedback"],
    [["body", "store_responses"], "storeResponses"],
    [["body", "policy", "synthetic", "latency_s"], "latency"],
    [["body", "segment_by", 1], "segmentBy"],
    [["body", "prompt", "system"], "prompt"],
    [["body", "seed"], "seed"],
    [["body", "allow_partial"], "allowPartial"],
    [["body", "histogram_bins"], "form"],
  ] as const)("%j -> %s", (loc, field) => {
    expect(fieldOf(loc)).toBe(field);
  });

  it("says the manager's messages in the form's words, at their fields", () => {
    // A slice of the manager's OpenAPI document: the ranges of the fields.
    const openapi = {
      components: {
        schemas: {
          SimulationConfig: {
            properties: { rounds: { minimum: 1, maximum: 1000, type: "integer" }, policy: { oneOf: [{ $ref: "#/components/schemas/LevelK" }] } },
            type: "object",
          },
          LevelK: { properties: { kind: { const: "level_k" }, noise_std: { minimum: 0, maximum: 1000000, type: "number" } }, type: "object" },
        },
      },
    };
    const issues = [
      { loc: ["body", "rounds"], msg: "Input should be less than or equal to 1000", type: "less_than_equal" },
      { loc: ["body", "policy", "level_k", "noise_std"], msg: "Input should be greater than or equal to 0", type: "greater_than_equal" },
      { loc: ["body", "policy", "endpoints", 1, "max_concurrency"], msg: "Input should be a valid integer, unable to parse string as an integer", type: "int_parsing" },
      { loc: ["body", "rouns"], msg: "Extra inputs are not permitted", type: "extra_forbidden" },
    ];
    expect(phraseLaunchIssues(issues, openapi)).toEqual([
      { field: "rounds", text: "Rounds must be between 1 and 1,000" },
      { field: "noiseStd", text: "Noise (std) must be between 0 and 1,000,000" },
      { field: "endpoints.1.maxConcurrency", text: "Endpoint 2 max concurrency must be a whole number" },
      { field: "form", text: "unknown field 'rouns' — did you mean 'rounds'?" },
    ]);
    // Before the schema is in: the message's own bound.
    expect(phraseLaunchIssues(issues.slice(0, 1), null)).toEqual([{ field: "rounds", text: "Rounds must be at most 1,000" }]);
  });
});

describe("the endpoint rules the form shows", () => {
  it("come from the manager's rules, one default per server kind", () => {
    expect(concurrencyPlaceholder).toBe("by server: vllm 256, openai 64, llama_cpp 2");
    expect(batchSizePlaceholder).toBe("by server: vllm 16, openai 1, llama_cpp 1");
    expect(Object.keys(DEFAULT_TOTAL_CONCURRENCY).sort()).toEqual([...SERVERS].sort());
    expect(Object.keys(SERVER_LABELS).sort()).toEqual([...SERVERS].sort());
  });

  it("clone keeps a server kind the rules know and falls back for one they do not", () => {
    const config = { rounds: 2, policy: { kind: "llm", endpoints: [{ base_url: "http://a", model: "m", server: "vllm" }, { base_url: "http://b", model: "m", server: "tgi" }] } };
    const { form } = formFromConfig(config, { population_id: 1, name: "x", seed: "1" });
    expect(form.endpoints.map((e) => e.server)).toEqual(["vllm", "openai"]);
  });
});
