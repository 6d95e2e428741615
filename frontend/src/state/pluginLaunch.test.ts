import { describe, expect, it } from "vitest";
import { chosenPlugin, type DeclaredPlugin, initialPluginForm, launchPageHref, phrasePluginIssues, pluginFieldOf, pluginFormFromConfig, pluginLaunchConfig } from "./pluginLaunch";

// The built-in public_goods plugin as GET /api/plugins lists it (the parts the form reads).
const PUBLIC_GOODS: DeclaredPlugin = {
  name: "public_goods",
  title: "Public goods",
  description: "Groups of agents each give tokens to a pot",
  params_schema: {
    additionalProperties: false,
    properties: {
      endowment: { default: 20, maximum: 1000000, minimum: 1, title: "Endowment", type: "integer" },
      multiplier: { default: 2.0, exclusiveMinimum: 0, maximum: 1000, title: "Multiplier", type: "number" },
      group_size: { default: 10, maximum: 100000, minimum: 2, title: "Group size", type: "integer" },
    },
    type: "object",
  },
  policies: [
    {
      name: "conditional_cooperator",
      title: "Conditional cooperator",
      description: "gives what its group gave on average last round",
      uses_llm: false,
      params_schema: { properties: { first: { default: 0.5, maximum: 1, minimum: 0, title: "First round", type: "number" } }, type: "object" },
    },
    { name: "free_rider", title: "Free rider", description: "gives nothing", uses_llm: false, params_schema: { properties: {}, type: "object" } },
    { name: "synthetic", title: "Synthetic", description: "random", uses_llm: false, params_schema: null },
    { name: "llm", title: "LLM", description: "a language model decides", uses_llm: true, params_schema: null },
  ],
  default_policy: "conditional_cooperator",
};

describe("the plugin launch body", () => {
  it("starts from the plugin's defaults and default policy, and posts plugin and policy params", () => {
    const form = initialPluginForm(PUBLIC_GOODS, "3");
    expect(form.policy).toBe("conditional_cooperator");
    expect(form.params).toEqual({ endowment: "20", multiplier: "2", group_size: "10" });
    const config = pluginLaunchConfig(PUBLIC_GOODS, { ...form, rounds: "3", seed: "7", params: { ...form.params, multiplier: "3.5" } });
    expect(config).toEqual({
      population_id: 3,
      rounds: 3,
      plugin: { name: "public_goods", params: { endowment: 20, multiplier: 3.5, group_size: 10 } },
      policy: { kind: "conditional_cooperator", params: { first: 0.5 } },
      segment_by: [],
      seed: "7",
    });
  });

  it("names a runtime policy by its kind alone, and keeps each policy's values apart", () => {
    const form = initialPluginForm(PUBLIC_GOODS, "1");
    expect(pluginLaunchConfig(PUBLIC_GOODS, { ...form, policy: "synthetic" }).policy).toEqual({ kind: "synthetic" });
    expect(pluginLaunchConfig(PUBLIC_GOODS, { ...form, policy: "free_rider" }).policy).toEqual({ kind: "free_rider", params: {} });
  });

  it("posts the LLM policy's endpoints, deadline and stored answers, and clones them", () => {
    const form = initialPluginForm(PUBLIC_GOODS, "2");
    const llm = { ...form.llm, endpoints: [{ ...form.llm.endpoints[0]!, baseUrl: "http://127.0.0.1:9000", model: "m" }], temperature: "0", agentDeadline: "20", storeResponses: true };
    const config = pluginLaunchConfig(PUBLIC_GOODS, { ...form, policy: "llm", llm });
    expect(config.policy).toEqual({ kind: "llm", endpoints: [{ base_url: "http://127.0.0.1:9000", model: "m", server: "llama_cpp" }], api: "completions", temperature: 0 });
    expect(config).toMatchObject({ deadlines: { agent_s: 20 }, store_responses: true });
    const cloned = pluginFormFromConfig(PUBLIC_GOODS, config, { population_id: 2, name: "llm run", seed: "1" });
    expect(cloned.policy).toBe("llm");
    expect(cloned.llm).toMatchObject({ temperature: "0", agentDeadline: "20", storeResponses: true });
    expect(cloned.llm.endpoints[0]).toMatchObject({ baseUrl: "http://127.0.0.1:9000", model: "m" });
  });

  it("fills a clone from the stored config", () => {
    const stored = {
      rounds: 4,
      plugin: { name: "public_goods", params: { endowment: 30, multiplier: 2, group_size: 5 } },
      policy: { kind: "conditional_cooperator", params: { first: 0.25 } },
      segment_by: ["education"],
      allow_partial: true,
    };
    const form = pluginFormFromConfig(PUBLIC_GOODS, stored, { population_id: 9, name: "commons", seed: "12345678901234567890" });
    expect(form).toMatchObject({ populationId: "9", name: "commons", rounds: "4", seed: "12345678901234567890", segmentBy: ["education"], allowPartial: true });
    expect(form.params).toEqual({ endowment: "30", multiplier: "2", group_size: "5" });
    expect(form.policyParams.conditional_cooperator).toEqual({ first: "0.25" });
  });

  it("opens the plugin the URL names, else the guessing game", () => {
    const plugins = [{ name: "guess" }, { name: "public_goods" }];
    expect(chosenPlugin(plugins, "public_goods")).toBe("public_goods");
    expect(chosenPlugin(plugins, "nope")).toBe("guess");
    expect(chosenPlugin(plugins, null)).toBe("guess");
    expect(chosenPlugin([{ name: "public_goods" }], null)).toBe("public_goods");
  });
});

describe("the manager's 422 at the plugin form's fields", () => {
  it("maps locs onto fields", () => {
    expect(pluginFieldOf(["body", "plugin", "params", "multiplier"])).toBe("param:multiplier");
    expect(pluginFieldOf(["body", "policy", "params", "first"])).toBe("policyParam:first");
    expect(pluginFieldOf(["body", "policy", "kind"])).toBe("policy");
    expect(pluginFieldOf(["body", "rounds"])).toBe("rounds");
    expect(pluginFieldOf(["body", "population_id"])).toBe("population");
    expect(pluginFieldOf(["body", "plugin", "name"])).toBe("form");
    // The LLM policy's own fields.
    expect(pluginFieldOf(["body", "policy", "llm", "endpoints", 0, "base_url"])).toBe("llm:endpoints.0.baseUrl");
    expect(pluginFieldOf(["body", "policy", "temperature"])).toBe("llm:temperature");
    expect(pluginFieldOf(["body", "deadlines", "agent_s"])).toBe("llm:agentDeadline");
  });

  it("phrases each problem with the field's label and range", () => {
    const policy = PUBLIC_GOODS.policies[0];
    const openapi = { components: { schemas: { SimulationConfig: { properties: { rounds: { minimum: 1, maximum: 1000, type: "integer" } }, type: "object" } } } };
    const problems = phrasePluginIssues(
      PUBLIC_GOODS,
      policy,
      [
        { loc: ["body", "plugin", "params", "endowment"], msg: "Input should be greater than or equal to 1", type: "simulation_config" },
        { loc: ["body", "policy", "params", "first"], msg: "Input should be less than or equal to 1", type: "simulation_config" },
        { loc: ["body", "rounds"], msg: "Input should be less than or equal to 1000", type: "less_than_equal" },
        { loc: ["body", "plugin", "params", "multiplier"], msg: "at most group_size (10): above it, giving pays for itself", type: "simulation_config" },
        { loc: ["body", "plugin", "params", "endowmnet"], msg: "Extra inputs are not permitted", type: "simulation_config" },
      ],
      openapi,
    );
    expect(problems).toEqual([
      { field: "param:endowment", text: "Endowment must be between 1 and 1,000,000" },
      { field: "policyParam:first", text: "First round must be between 0 and 1" },
      { field: "rounds", text: "Rounds must be between 1 and 1,000" },
      { field: "param:multiplier", text: "Multiplier: at most group_size (10): above it, giving pays for itself" },
      { field: "param:endowmnet", text: "unknown field 'endowmnet' — did you mean 'endowment'?" },
    ]);
  });
});

describe("launchPageHref", () => {
  it("leads the runs page's launch and clone links to the launch page", () => {
    expect(launchPageHref("?launch&population=3")).toBe("/simulations/new?population=3");
    expect(launchPageHref("?launch=1&population=987654")).toBe("/simulations/new?population=987654");
    expect(launchPageHref("?clone=5")).toBe("/simulations/new?clone=5");
    expect(launchPageHref("?launch")).toBe("/simulations/new");
    expect(launchPageHref("?status=running&sort=-id")).toBeNull();
  });
});
