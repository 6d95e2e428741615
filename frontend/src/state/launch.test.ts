import { describe, expect, it } from "vitest";
import { fieldOf, initialLaunchForm, issuesByField, launchConfig } from "./launch";

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
      rule: { preset: "1/2+5" },
      prompt: { system: "plain", user: "basic" },
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
    const llm = launchConfig({ ...initialLaunchForm, populationId: "1", policy: "llm", maxConcurrency: "lots", name: "  run  " });
    expect(llm.policy).toEqual({
      kind: "llm",
      endpoints: [{ base_url: "http://127.0.0.1:8081", model: "gemma-3-270m", server: "llama_cpp", max_concurrency: "lots" }],
      api: "completions",
      temperature: 0.7,
    });
    expect(llm.name).toBe("run");
    const keyed = launchConfig({ ...initialLaunchForm, populationId: "1", policy: "llm", apiKeyEnv: " OPENAI_API_KEY " });
    expect((keyed.policy as { endpoints: Record<string, unknown>[] }).endpoints[0]).toMatchObject({ api_key_env: "OPENAI_API_KEY" });
    expect("api_key_env" in (llm.policy as { endpoints: Record<string, unknown>[] }).endpoints[0]!).toBe(false);
    // A blank concurrency leaves the total to the manager's default for the server kind.
    const byDefault = launchConfig({ ...initialLaunchForm, populationId: "1", policy: "llm" });
    expect("max_concurrency" in (byDefault.policy as { endpoints: Record<string, unknown>[] }).endpoints[0]!).toBe(false);
    expect("batch_size" in (byDefault.policy as { endpoints: Record<string, unknown>[] }).endpoints[0]!).toBe(false);
    expect("integer_answers" in (byDefault.policy as Record<string, unknown>)).toBe(false);
    const whole = launchConfig({ ...initialLaunchForm, populationId: "1", policy: "llm", integerAnswers: true });
    expect(whole.policy).toMatchObject({ integer_answers: true });
    const batched = launchConfig({ ...initialLaunchForm, populationId: "1", policy: "llm", server: "vllm", batchSize: "32" });
    expect((batched.policy as { endpoints: Record<string, unknown>[] }).endpoints[0]).toMatchObject({ batch_size: 32 });
    expect(launchConfig({ ...initialLaunchForm, populationId: "1", policy: "synthetic", latency: "1.5" }).policy).toEqual({
      kind: "synthetic",
      latency_s: 1.5,
    });
    expect(launchConfig({ ...initialLaunchForm, rounds: "" }).rounds).toBe("");
    expect("seed" in launchConfig(initialLaunchForm)).toBe(false);
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
    [["body", "policy"], "policy"],
    [["body", "policy", "level_k", "noise_std"], "noiseStd"],
    [["body", "policy", "level_k", "depth_by_category", "doctorate"], "depthByCategory"],
    [["body", "policy", "llm", "endpoints", 0, "base_url"], "endpoint"],
    [["body", "policy", "llm", "endpoints", 0, "max_concurrency"], "maxConcurrency"],
    [["body", "policy", "llm", "endpoints", 0, "batch_size"], "batchSize"],
    [["body", "policy", "llm", "endpoints", 0, "model"], "model"],
    [["body", "policy", "llm", "endpoints", 0, "api_key_env"], "apiKeyEnv"],
    [["body", "policy", "llm", "endpoints", 0, "api_key"], "apiKeyEnv"],
    [["body", "policy", "llm", "model"], "model"],
    [["body", "policy", "synthetic", "latency_s"], "latency"],
    [["body", "segment_by", 1], "segmentBy"],
    [["body", "prompt", "system"], "prompt"],
    [["body", "seed"], "seed"],
    [["body", "allow_partial"], "allowPartial"],
    [["body", "histogram_bins"], "form"],
  ] as const)("%j -> %s", (loc, field) => {
    expect(fieldOf(loc)).toBe(field);
  });

  it("groups the manager's messages by field", () => {
    expect(
      issuesByField([
        { loc: ["body", "rounds"], msg: "Input should be less than or equal to 1000" },
        { loc: ["body", "policy", "level_k", "noise_std"], msg: "Input should be greater than or equal to 0" },
        { loc: ["body", "rounds"], msg: "second" },
      ]),
    ).toEqual({ rounds: ["Input should be less than or equal to 1000", "second"], noiseStd: ["Input should be greater than or equal to 0"] });
  });
});
