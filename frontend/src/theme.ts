// Light, dark, or whatever the system says: the reader's choice, kept in localStorage for every
// tab. index.html applies it before the first paint (a dark page never flashes white); its
// inline script mirrors resolveTheme and must read the same key (theme.test.ts runs it).

export type ThemeChoice = "light" | "dark" | "system";
export type Theme = "light" | "dark";

export const THEME_KEY = "populace.theme";
export const THEME_CHOICES: ReadonlyArray<{ value: ThemeChoice; label: string }> = [
  { value: "system", label: "System theme" },
  { value: "light", label: "Light" },
  { value: "dark", label: "Dark" },
];

const DARK_QUERY = "(prefers-color-scheme: dark)";

/** A stored value as a choice; anything else (nothing stored, an old value) is "system". */
export function parseThemeChoice(stored: string | null | undefined): ThemeChoice {
  return stored === "light" || stored === "dark" ? stored : "system";
}

/** The palette a choice shows, given whether the system prefers dark. */
export function resolveTheme(choice: ThemeChoice, systemDark: boolean): Theme {
  if (choice === "system") return systemDark ? "dark" : "light";
  return choice;
}

export function loadThemeChoice(storage: Pick<Storage, "getItem"> | undefined = safeLocalStorage()): ThemeChoice {
  try {
    return parseThemeChoice(storage?.getItem(THEME_KEY));
  } catch {
    return "system";
  }
}

/** Remembers the choice; "system" is stored as no value, so a later default change applies. */
export function saveThemeChoice(choice: ThemeChoice, storage: Pick<Storage, "setItem" | "removeItem"> | undefined = safeLocalStorage()): void {
  try {
    if (choice === "system") storage?.removeItem(THEME_KEY);
    else storage?.setItem(THEME_KEY, choice);
  } catch {
    // Storage may be disabled: the choice then lasts for this page only.
  }
}

export function systemPrefersDark(): boolean {
  return typeof matchMedia === "function" && matchMedia(DARK_QUERY).matches;
}

/** Shows a palette: styles.css keys its dark tokens on html[data-theme="dark"]. */
export function applyTheme(theme: Theme, root: HTMLElement = document.documentElement): void {
  root.dataset.theme = theme;
}

/** Calls back when the system's light/dark preference changes; returns the unsubscribe. */
export function watchSystemTheme(onChange: (dark: boolean) => void): () => void {
  if (typeof matchMedia !== "function") return () => {};
  const query = matchMedia(DARK_QUERY);
  const listener = (event: MediaQueryListEvent) => onChange(event.matches);
  query.addEventListener("change", listener);
  return () => query.removeEventListener("change", listener);
}

function safeLocalStorage(): Storage | undefined {
  try {
    return typeof localStorage === "undefined" ? undefined : localStorage;
  } catch {
    return undefined;
  }
}
