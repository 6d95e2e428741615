import { describe, expect, it } from "vitest";
import type { SimulationListItem } from "../api/types";
import { interviewable } from "../components/InterviewPanel";
import { firstChoice } from "./usePopulationSimulations";

const run = (id: number, policy: string, plugin = "guess") => ({ id, policy, plugin }) as unknown as SimulationListItem;

describe("firstChoice", () => {
  it("offers the newest run the caller prefers, else the newest", () => {
    const runs = [run(9, "level_k"), run(7, "llm", "public_goods"), run(5, "llm"), run(3, "synthetic")];
    expect(firstChoice(runs, interviewable)).toBe(5);
    expect(firstChoice(runs)).toBe(9);
    expect(firstChoice([run(2, "level_k")], interviewable)).toBe(2);
    expect(firstChoice([], interviewable)).toBeNull();
    expect(firstChoice(null)).toBeNull();
  });
});
