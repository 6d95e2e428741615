import type { ConnectionStatus } from "../api/events";

/**
 * What the live-updates badge says. The socket's own status is not the whole truth: a browser
 * with no network, a manager that REST cannot reach (a load failed with no answer, or a proxy's
 * 502/503/504 during a deploy), or a socket that has been reconnecting for a while are all
 * "offline", never "live". Pure, so the rules are unit-tested.
 */
export type BadgeTone = "live" | "connecting" | "reconnecting" | "offline" | "closed";

export interface ConnectionFacts {
  /** navigator.onLine. */
  online: boolean;
  /** The page's last REST load got no answer from the manager. */
  unreachable: boolean;
  /** How long the socket has been reconnecting without opening (0 when it is not). */
  reconnectingMs: number;
}

/** Reconnecting longer than this (several backoff attempts) reads as offline. */
export const OFFLINE_AFTER_MS = 15_000;

export function connectionBadge(status: ConnectionStatus, facts: ConnectionFacts): { tone: BadgeTone; text: string; title: string } {
  if (!facts.online) return { tone: "offline", text: "offline", title: "This browser has no network connection; updates resume when it is back" };
  if (facts.unreachable) return { tone: "offline", text: "offline", title: "The manager does not answer; the page retries, or press Retry" };
  switch (status) {
    case "live":
      return { tone: "live", text: "live", title: "Live updates from the manager" };
    case "connecting":
      return { tone: "connecting", text: "connecting…", title: "Opening the live updates" };
    case "reconnecting":
    case "stale":
      return facts.reconnectingMs >= OFFLINE_AFTER_MS
        ? { tone: "offline", text: "offline, retrying…", title: "The live updates have been down for a while; still trying to reconnect" }
        : { tone: "reconnecting", text: "reconnecting…", title: "The live updates dropped; reconnecting and catching up" };
    case "closed":
      return { tone: "closed", text: "disconnected", title: "No live updates" };
  }
}
