import { describe, expect, it } from "vitest";
import { clearToken, loadToken, saveToken, splitTokenFromFragment, tokenChange, watchToken } from "./token";

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

class MemoryStorage {
  items = new Map<string, string>();
  getItem(key: string) {
    return this.items.get(key) ?? null;
  }
  setItem(key: string, value: string) {
    this.items.set(key, value);
  }
  removeItem(key: string) {
    this.items.delete(key);
  }
}

describe("token storage", () => {
  it("saves, loads and clears the token in the given (local) storage", () => {
    const storage = new MemoryStorage();
    expect(loadToken(storage)).toBeNull();
    saveToken("t-1", storage);
    expect(loadToken(storage)).toBe("t-1");
    clearToken(storage);
    expect(loadToken(storage)).toBeNull();
  });

  it("reads only our key from storage events; a clear() signs out", () => {
    expect(tokenChange({ key: "populace.apiToken", newValue: "t-2" })).toBe("t-2");
    expect(tokenChange({ key: "populace.apiToken", newValue: null })).toBeNull();
    expect(tokenChange({ key: null, newValue: null })).toBeNull();
    expect(tokenChange({ key: "other", newValue: "x" })).toBeUndefined();
  });

  it("tells the listener about sign-outs in other tabs until unsubscribed", () => {
    const target = new EventTarget();
    const seen: Array<string | null> = [];
    const stop = watchToken((t) => seen.push(t), target as unknown as Window);
    const fire = (key: string | null, newValue: string | null) =>
      target.dispatchEvent(Object.assign(new Event("storage"), { key, newValue }));
    fire("populace.apiToken", null);
    fire("unrelated", "1");
    fire("populace.apiToken", "t-3");
    stop();
    fire("populace.apiToken", null);
    expect(seen).toEqual([null, "t-3"]);
  });
});
