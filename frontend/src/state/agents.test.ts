import { describe, expect, it } from "vitest";
import { agentNumber } from "./agents";

describe("agentNumber", () => {
  it("is the agent's 1-based place in its population", () => {
    expect(agentNumber(4_294_967_296, 1)).toBe(1);
    expect(agentNumber(3 * 2 ** 32 + 41, 3)).toBe(42);
  });
});
