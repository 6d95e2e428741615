import { describe, expect, it } from "vitest";
import { actionText } from "./AgentDecisions";

describe("actionText", () => {
  it("shows an action in its plugin's type", () => {
    expect(actionText("stay")).toBe("stay");
    expect(actionText(true)).toBe("true");
    expect(actionText(12)).toBe("12");
    expect(actionText(33.333)).toBe("33.33");
    expect(actionText(null)).toBe("–");
  });
});
