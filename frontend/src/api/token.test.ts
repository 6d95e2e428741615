import { describe, expect, it } from "vitest";
import { splitTokenFromFragment } from "./token";

describe("splitTokenFromFragment", () => {
  it("takes the token and leaves nothing behind", () => {
    expect(splitTokenFromFragment("#token=abc%2Bdef")).toEqual({ token: "abc+def", rest: "" });
  });

  it("keeps other fragment parameters", () => {
    expect(splitTokenFromFragment("#token=t1&tab=2")).toEqual({ token: "t1", rest: "#tab=2" });
  });

  it("leaves a fragment without a token alone", () => {
    expect(splitTokenFromFragment("#section")).toEqual({ token: null, rest: "#section" });
    expect(splitTokenFromFragment("")).toEqual({ token: null, rest: "" });
  });
});
