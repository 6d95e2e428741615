// @vitest-environment happy-dom
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { THEME_KEY, loadThemeChoice, parseThemeChoice, resolveTheme, saveThemeChoice } from "./theme";

function memoryStorage(initial: Record<string, string> = {}) {
  const items = new Map(Object.entries(initial));
  return {
    items,
    getItem: (key: string) => items.get(key) ?? null,
    setItem: (key: string, value: string) => void items.set(key, value),
    removeItem: (key: string) => void items.delete(key),
  };
}

describe("theme choice", () => {
  it("reads light and dark, and anything else as the system's", () => {
    expect(parseThemeChoice("light")).toBe("light");
    expect(parseThemeChoice("dark")).toBe("dark");
    expect(parseThemeChoice(null)).toBe("system");
    expect(parseThemeChoice("sepia")).toBe("system");
  });

  it("resolves system to the OS preference and keeps an explicit choice whatever the OS says", () => {
    expect(resolveTheme("system", true)).toBe("dark");
    expect(resolveTheme("system", false)).toBe("light");
    expect(resolveTheme("light", true)).toBe("light");
    expect(resolveTheme("dark", false)).toBe("dark");
  });

  it("remembers light or dark, and forgets the key for system", () => {
    const storage = memoryStorage();
    saveThemeChoice("dark", storage);
    expect(storage.items.get(THEME_KEY)).toBe("dark");
    expect(loadThemeChoice(storage)).toBe("dark");
    saveThemeChoice("system", storage);
    expect(storage.items.has(THEME_KEY)).toBe(false);
    expect(loadThemeChoice(storage)).toBe("system");
  });

  it("survives storage that throws", () => {
    const broken = {
      getItem: () => {
        throw new Error("blocked");
      },
      setItem: () => {
        throw new Error("blocked");
      },
      removeItem: () => {
        throw new Error("blocked");
      },
    };
    expect(loadThemeChoice(broken)).toBe("system");
    expect(() => saveThemeChoice("dark", broken)).not.toThrow();
  });
});

describe("index.html's pre-paint script", () => {
  // The script that runs before the bundle, as shipped, must agree with resolveTheme.
  const html = readFileSync(join(__dirname, "..", "index.html"), "utf8");
  const script = /<script id="theme-boot">([\s\S]*?)<\/script>/.exec(html)?.[1] ?? "";

  function boot(stored: string | null, systemDark: boolean): string | undefined {
    const root = { dataset: {} as Record<string, string> };
    const storage = memoryStorage(stored === null ? {} : { [THEME_KEY]: stored });
    const matchMedia = (query: string) => ({ matches: query === "(prefers-color-scheme: dark)" && systemDark });
    new Function("localStorage", "window", "document", script)(storage, { matchMedia }, { documentElement: root });
    return root.dataset.theme;
  }

  it("is there", () => {
    expect(script).toContain(THEME_KEY);
  });

  it.each([
    [null, true],
    [null, false],
    ["light", true],
    ["dark", false],
    ["bogus", true],
  ] as const)("stored %s with a dark OS %s shows what resolveTheme says", (stored, systemDark) => {
    expect(boot(stored, systemDark)).toBe(resolveTheme(parseThemeChoice(stored), systemDark));
  });
});
