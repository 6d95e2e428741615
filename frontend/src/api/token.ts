// The API token lives in localStorage, so every tab of this browser is signed in (a new tab
// opened from a link used to ask again) and signing out in one tab signs out all of them (the
// `storage` event, see watchToken). It is never written to the URL we keep (a token in an
// address ends up in history, logs and Referer headers). localStorage is readable by script on
// this origin, as sessionStorage was: the dashboard loads no third-party script.

const STORAGE_KEY = "populace.apiToken";

export function loadToken(storage: Pick<Storage, "getItem"> | undefined = safeLocalStorage()): string | null {
  try {
    return storage?.getItem(STORAGE_KEY) ?? null;
  } catch {
    return null;
  }
}

export function saveToken(token: string, storage: Pick<Storage, "setItem"> | undefined = safeLocalStorage()): void {
  try {
    storage?.setItem(STORAGE_KEY, token);
  } catch {
    // Storage may be disabled; the token then lasts for this page only.
  }
}

export function clearToken(storage: Pick<Storage, "removeItem"> | undefined = safeLocalStorage()): void {
  try {
    storage?.removeItem(STORAGE_KEY);
  } catch {
    // nothing stored
  }
}

function safeLocalStorage(): Storage | undefined {
  try {
    return typeof localStorage === "undefined" ? undefined : localStorage;
  } catch {
    return undefined; // access itself throws when storage is blocked
  }
}

/** The new token when a `storage` event is about ours (null: signed out), else undefined. */
export function tokenChange(event: { key: string | null; newValue: string | null }): string | null | undefined {
  if (event.key === null) return null; // storage.clear() in another tab
  if (event.key !== STORAGE_KEY) return undefined;
  return event.newValue;
}

/** Calls `listener` when another tab signs in or out; returns the unsubscribe function. */
export function watchToken(listener: (token: string | null) => void, target: Pick<Window, "addEventListener" | "removeEventListener"> = window): () => void {
  const onStorage = (event: StorageEvent) => {
    const change = tokenChange(event);
    if (change !== undefined) listener(change);
  };
  target.addEventListener("storage", onStorage);
  return () => target.removeEventListener("storage", onStorage);
}

/**
 * Splits `#token=...` (as printed by `populace demo`) out of a URL fragment.
 * Returns the token and the fragment that remains without it ("" when nothing is left).
 */
export function splitTokenFromFragment(hash: string): { token: string | null; rest: string } {
  const raw = hash.startsWith("#") ? hash.slice(1) : hash;
  if (!raw) return { token: null, rest: "" };
  const params = new URLSearchParams(raw);
  const token = params.get("token");
  if (token === null) return { token: null, rest: hash };
  params.delete("token");
  const remaining = params.toString();
  return { token: token.trim() || null, rest: remaining ? `#${remaining}` : "" };
}

/** Reads a token from the address bar's fragment, stores it, and strips it from the address bar. */
export function adoptTokenFromLocation(): string | null {
  const { token, rest } = splitTokenFromFragment(window.location.hash);
  if (token === null && rest === window.location.hash) return null;
  window.history.replaceState(window.history.state, "", window.location.pathname + window.location.search + rest);
  if (token) saveToken(token);
  return token;
}
