// The API token lives in sessionStorage: it survives reloads of the tab but
// not the browser session, and is never written to the URL we keep.

const STORAGE_KEY = "populace.apiToken";

export function loadToken(): string | null {
  try {
    return sessionStorage.getItem(STORAGE_KEY);
  } catch {
    return null;
  }
}

export function saveToken(token: string): void {
  try {
    sessionStorage.setItem(STORAGE_KEY, token);
  } catch {
    // Storage may be disabled; the token then lasts for this page only.
  }
}

export function clearToken(): void {
  try {
    sessionStorage.removeItem(STORAGE_KEY);
  } catch {
    // nothing stored
  }
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
