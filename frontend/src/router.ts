import { useSyncExternalStore } from "react";

// Two or three pages do not need a router library: the path lives in the
// History API and the manager's SPA fallback serves index.html for any path.

const listeners = new Set<() => void>();

function subscribe(listener: () => void): () => void {
  listeners.add(listener);
  window.addEventListener("popstate", listener);
  return () => {
    listeners.delete(listener);
    window.removeEventListener("popstate", listener);
  };
}

export function usePath(): string {
  return useSyncExternalStore(subscribe, () => window.location.pathname);
}

/** The query string (with its "?"), so pages can keep paging, filters and choices in the URL. */
export function useSearch(): string {
  return useSyncExternalStore(subscribe, () => window.location.search);
}

/** One query parameter of the current URL (null when absent); re-renders when it changes. */
export function useSearchParam(name: string): string | null {
  return new URLSearchParams(useSearch()).get(name);
}

/**
 * Sets (or, with null, removes) query parameters in place: replaceState, so choosing a
 * filter or a page does not add a history entry per click.
 */
export function setSearchParams(changes: Record<string, string | null>): void {
  const params = new URLSearchParams(window.location.search);
  for (const [name, value] of Object.entries(changes)) {
    if (value === null || value === "") params.delete(name);
    else params.set(name, value);
  }
  const query = params.toString();
  const url = window.location.pathname + (query ? `?${query}` : "") + window.location.hash;
  if (url === window.location.pathname + window.location.search + window.location.hash) return;
  window.history.replaceState(null, "", url);
  for (const listener of listeners) listener();
}

/** Goes to a path, which may carry a query string ("/compare?ids=1,2"); `replace` takes the
 * current history entry's place (an old link redirected). */
export function navigate(path: string, { replace = false }: { replace?: boolean } = {}): void {
  if (path === window.location.pathname + window.location.search) return;
  if (replace) window.history.replaceState(null, "", path);
  else window.history.pushState(null, "", path);
  for (const listener of listeners) listener();
}

/** The pages, by path (the header's NAV links the top-level ones). */
export type Route =
  | { page: "cluster" }
  | { page: "worker"; id: number }
  | { page: "populations" }
  | { page: "population"; id: number }
  | { page: "agent"; id: number }
  | { page: "simulations" }
  | { page: "simulationNew" }
  | { page: "simulation"; id: number }
  | { page: "sweeps" }
  | { page: "sweep"; id: number }
  | { page: "compare" }
  | { page: "apiDocs" }
  | { page: "notFound" };

const ROUTES: ReadonlyArray<[RegExp, (match: RegExpExecArray) => Route]> = [
  [/^\/(?:cluster)?$/, () => ({ page: "cluster" })],
  [/^\/workers\/(\d+)$/, (m) => ({ page: "worker", id: Number(m[1]) })],
  [/^\/populations$/, () => ({ page: "populations" })],
  [/^\/populations\/(\d+)$/, (m) => ({ page: "population", id: Number(m[1]) })],
  [/^\/agents\/(\d+)$/, (m) => ({ page: "agent", id: Number(m[1]) })],
  [/^\/simulations$/, () => ({ page: "simulations" })],
  [/^\/simulations\/new$/, () => ({ page: "simulationNew" })],
  [/^\/simulations\/(\d+)$/, (m) => ({ page: "simulation", id: Number(m[1]) })],
  [/^\/sweeps$/, () => ({ page: "sweeps" })],
  [/^\/sweeps\/(\d+)$/, (m) => ({ page: "sweep", id: Number(m[1]) })],
  [/^\/compare$/, () => ({ page: "compare" })],
  // The one /api path that is a page: the manager serves the dashboard for exactly /api/docs.
  [/^\/api\/docs$/, () => ({ page: "apiDocs" })],
];

export function matchRoute(path: string): Route {
  const trimmed = path.length > 1 ? path.replace(/\/+$/, "") : path;
  for (const [pattern, make] of ROUTES) {
    const match = pattern.exec(trimmed);
    if (match) return make(match);
  }
  return { page: "notFound" };
}
