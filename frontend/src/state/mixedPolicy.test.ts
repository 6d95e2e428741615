import { describe, expect, it } from "vitest";
import { fieldOf, formFromConfig, initialLaunchForm, launchConfig, llmPercent } from "./launch";
import { type DeclaredPlugin, initialPluginForm, pluginFieldOf, pluginFormFromConfig, pluginLaunchConfig } from "./pluginLaunch";
import { partWho, policyRows } from "./policyParts";

const PLUGIN: DeclaredPlugin = {
  name: "public_goods",
  title: "Public goods",
  description: "Groups of agents each give tokens to a pot",
  params_schema: { properties: {}, type: "object" },
  policies: [
    { name: "free_rider", title: "Free rider", description: "gives nothing", uses_llm: false, params_schema: { properties: {}, type: "object" } },
    { name: "llm", title: "LLM", description: "a language model decides", uses_llm: true, params_schema: null },
  ],
  default_policy: "free_rider",
};
const ENDPOINT = { baseUrl: "http://gpu:8000", model: "m", server: "vllm" as const, apiKeyEnv: "", maxConcurrency: "", batchSize: "", pricePrompt: "", priceCompletion: "" };

describe("a mixed population in the launch forms", () => {
  it("mixes an LLM share into the guessing game's level-k policy, and only a share strictly between 0 and 100", () => {
    expect([llmPercent(""), llmPercent("0"), llmPercent("100"), llmPercent("10")]).toEqual([null, null, null, 10]);
    const form = { ...initialLaunchForm, populationId: "4", policy: "level_k" as const, llmShare: "10", endpoints: [ENDPOINT], integerAnswers: true };
    const config = launchConfig(form);
    const policy = config.policy as { kind: string; shares: { share: number; policy: Record<string, unknown> }[] };
    expect(policy.kind).toBe("mixed");
    expect(policy.shares.map((s) => s.share)).toEqual([0.1, 0.9]);
    expect(policy.shares[0]!.policy).toMatchObject({ kind: "llm", integer_answers: true, endpoints: [{ base_url: "http://gpu:8000", model: "m" }] });
    expect(policy.shares[1]!.policy.kind).toBe("level_k");
    // The LLM part asks with the form's prompt.
    expect(config.prompt).toEqual({ system: "plain", user: "basic" });
    expect((launchConfig({ ...form, llmShare: "" }).policy as { kind: string }).kind).toBe("level_k");
  });

  it("clones a mixed run back into the form, and shows the manager's 422s at the LLM part's fields", () => {
    const config = launchConfig({ ...initialLaunchForm, populationId: "4", policy: "synthetic", llmShare: "25", endpoints: [ENDPOINT], temperature: "0.5" });
    const { form } = formFromConfig(config, { population_id: 4, name: "mix", seed: "9" });
    expect([form.policy, form.llmShare, form.temperature, form.endpoints[0]?.baseUrl]).toEqual(["synthetic", "25", "0.5", "http://gpu:8000"]);
    expect(fieldOf(["body", "policy", "mixed", "shares", 0, "policy", "llm", "endpoints", 0, "base_url"])).toBe("endpoints.0.baseUrl");
    expect(fieldOf(["body", "policy", "mixed", "shares"])).toBe("llmShare");
    expect(fieldOf(["body", "policy", "mixed", "shares", 1, "policy", "level_k", "noise_std"])).toBe("noiseStd");
  });

  it("mixes an LLM share into a plugin's rule-based policy", () => {
    const form = { ...initialPluginForm(PLUGIN, "2"), llmShare: "10", llm: { ...initialPluginForm(PLUGIN).llm, endpoints: [ENDPOINT] } };
    const config = pluginLaunchConfig(PLUGIN, form);
    expect(config.policy).toMatchObject({
      kind: "mixed",
      shares: [
        { share: 0.1, policy: { kind: "llm", endpoints: [{ base_url: "http://gpu:8000" }] } },
        { share: 0.9, policy: { kind: "free_rider", params: {} } },
      ],
    });
    const cloned = pluginFormFromConfig(PLUGIN, config, { population_id: 2, name: "mix", seed: "1" });
    expect([cloned.policy, cloned.llmShare, cloned.llm.endpoints[0]?.model]).toEqual(["free_rider", "10", "m"]);
    expect(pluginFieldOf(["body", "policy", "mixed", "shares", 0, "policy", "llm", "temperature"])).toBe("llm:temperature");
    expect(pluginFieldOf(["body", "policy", "mixed", "shares"])).toBe("llmShare");
    // Without an LLM share the policy stays as chosen.
    expect(pluginLaunchConfig(PLUGIN, { ...form, llmShare: "" }).policy).toEqual({ kind: "free_rider", params: {} });
  });
});

describe("the run page's parts by policy", () => {
  const parts = [
    { label: "llm", kind: "llm", agents: 20, share: 0.1 },
    { label: "free_rider", kind: "free_rider", agents: 180, share: 0.9 },
  ];

  it("lists each part with who plays it and the shown round's figures", () => {
    const rows = policyRows(parts, {
      llm: { agents: 20, n_valid: 18, n_invalid: 1, n_late: 1, n_lost: 0, mean: 7 },
      free_rider: { agents: 180, n_valid: 180, n_invalid: 0, n_late: 0, n_lost: 0, mean: 0 },
    });
    expect(rows.map((r) => [r.label, r.who, r.agents, r.valid, r.invalid, r.mean])).toEqual([
      ["llm", "10 % of the agents", 20, 18, 2, 7],
      ["free_rider", "90 % of the agents", 180, 180, 0, 0],
    ]);
    expect(policyRows(parts, undefined)[0]?.valid).toBeNull();
  });

  it("shows nothing for a plain policy, and says who plays a part by attribute", () => {
    expect(policyRows([{ label: "llm", kind: "llm", agents: 200 }], undefined)).toEqual([]);
    expect(partWho({ label: "a", kind: "llm", agents: 3, attribute: "education", categories: ["master", "doctorate"] })).toBe("education: master, doctorate");
    expect(partWho({ label: "b", kind: "free_rider", agents: 9, attribute: "education", categories: [] })).toBe("other education");
  });
});
