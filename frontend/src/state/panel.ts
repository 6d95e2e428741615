import { ApiError, NetworkError, errorMessage } from "../api/client";

/**
 * A panel's data as it loads: a skeleton until the first answer, then the data; a failure shows
 * its reason with a Retry (keeping what was shown before, if anything); Retry loads again. Pure,
 * so the rules are unit-tested; hooks/usePanel.ts drives it.
 *
 *   loading ──loaded──▶ ready ──start──▶ loading (data kept: a refresh, no skeleton)
 *      │                  ▲
 *    failed             loaded
 *      ▼                  │
 *    error ───start (Retry)──▶ loading
 */
export type PanelPhase = "loading" | "ready" | "error";

export interface PanelState<T> {
  phase: PanelPhase;
  /** The last answer; null until the first one. */
  data: T | null;
  /** Why the last load failed ("Could not load …: reason"), in phase "error" only. */
  error: string | null;
  /** The last failure never reached the manager (network down, proxy 502/503/504 during a deploy). */
  unreachable: boolean;
}

export type PanelAction<T> = { type: "start" } | { type: "loaded"; data: T } | { type: "failed"; error: string; unreachable: boolean };

export function initialPanel<T>(): PanelState<T> {
  return { phase: "loading", data: null, error: null, unreachable: false };
}

export function panelReducer<T>(state: PanelState<T>, action: PanelAction<T>): PanelState<T> {
  switch (action.type) {
    case "start":
      return state.phase === "loading" ? state : { ...state, phase: "loading", error: null };
    case "loaded":
      return { phase: "ready", data: action.data, error: null, unreachable: false };
    case "failed":
      return { ...state, phase: "error", error: action.error, unreachable: action.unreachable };
  }
}

/** What the panel shows: a skeleton (nothing yet), the error with Retry, or the data. */
export function panelView<T>(state: PanelState<T>): "skeleton" | "error" | "data" {
  if (state.phase === "error") return "error";
  return state.data === null ? "skeleton" : "data";
}

/** A request that got no answer from the manager itself: the network, or a proxy in front of it. */
export function isUnreachable(err: unknown): boolean {
  if (err instanceof NetworkError) return true;
  return err instanceof ApiError && (err.status === 502 || err.status === 503 || err.status === 504);
}

/** "Could not load rounds: Cannot reach the manager (Failed to fetch)". */
export function failureText(failure: string, err: unknown): string {
  return `${failure}: ${errorMessage(err)}`;
}
