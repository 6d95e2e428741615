import { describe, expect, it } from "vitest";
import { type RunEstimate, llmModeHint, llmModeLabel, sharingText } from "./estimate";

const base: RunEstimate = { agents: 10_000, rounds: 3, requests: 1131, prompt_tokens: 105_811, completion_tokens: 9_000, cost_usd: null };

describe("the estimate in plain words", () => {
  it("says how agents with one prompt share, never 'exchangeable agents'", () => {
    expect(sharingText({ ...base, llm_mode: "exchangeable", reads: 120, distinct_prompts: 10 })).toBe(
      "agents with the same prompt share one answer distribution: about 40 reads a round (10 different prompts in round 1)",
    );
    expect(sharingText({ ...base, llm_mode: "exchangeable", reads: 3, distinct_prompts: 1 })).toBe(
      "agents with the same prompt share one answer distribution: about 1 read a round (one prompt for all in round 1)",
    );
    expect(sharingText({ ...base, llm_mode: "exchangeable", reads: 1 })).toBe("agents with the same prompt share one answer distribution: less than one read a round");
    expect(sharingText({ ...base, llm_mode: "exchangeable", reads: 0, distinct_prompts: 9000 })).toBe(
      "agents with the same prompt share one answer distribution, but no prompt has enough agents to be worth a read: each one asks (9,000 different prompts in round 1)",
    );
    expect(sharingText({ ...base, llm_mode: "shared", distinct_prompts: 48 })).toBe("agents with the same prompt share one answer (48 different prompts in round 1)");
    expect(sharingText({ ...base, llm_mode: "per_agent", distinct_prompts: 48 })).toBe("one request per agent");
  });

  it("says nothing without LLM requests", () => {
    expect(sharingText({ ...base, requests: 0, llm_mode: null })).toBe("");
    expect(sharingText({ ...base, requests: 0, llm_mode: "per_agent" })).toBe("");
  });

  it("labels the run card's mode in plain words, and an unknown one as named", () => {
    expect(llmModeLabel("exchangeable")).toBe("agents with the same prompt share one answer distribution");
    expect(llmModeLabel("per_agent")).toBe("one request per agent");
    expect(llmModeLabel("future_mode")).toBe("future_mode");
    expect(llmModeHint("exchangeable")).toContain("draws its own answer from it");
    expect(llmModeHint("future_mode")).toBe("");
  });
});
