// Telling the reader that a run finished or failed while they look at another page: the
// notices (toasts) and the tab title of a hidden tab. Fed by simulation.updated events from
// the socket the dashboard already opens; pure, so it is unit-tested (runNotices.test.ts).

import type { EventMessage } from "../api/types";

/** The statuses worth interrupting for: the run is done, well or badly. */
const NOTIFY = new Set(["completed", "failed"]);
/** At most this many notices stay on screen; older ones give way. */
export const MAX_NOTICES = 3;

export interface RunNotice {
  /** The run's id and status: one notice per run and outcome, however often it is repeated. */
  key: string;
  simulationId: number;
  status: "completed" | "failed";
  /** The run's name once known (fetched after the event); until then "Simulation N". */
  name: string | null;
  error: string | null;
}

/**
 * The notice an event calls for, or null: only a run that just completed or failed, and not
 * while its own page is open (that page shows it already).
 */
export function noticeFromEvent(event: EventMessage, path: string): RunNotice | null {
  if (event.type !== "simulation.updated") return null;
  const id = Number(event.payload?.simulation_id);
  const status = event.payload?.status;
  if (!Number.isInteger(id) || typeof status !== "string" || !NOTIFY.has(status)) return null;
  if (path === `/simulations/${id}`) return null;
  const error = event.payload?.error;
  return { key: `${id}:${status}`, simulationId: id, status: status as RunNotice["status"], name: null, error: typeof error === "string" ? error : null };
}

/** Adds a notice (newest last), once per key, keeping the last MAX_NOTICES. */
export function addNotice(notices: readonly RunNotice[], notice: RunNotice): RunNotice[] {
  if (notices.some((n) => n.key === notice.key)) return [...notices];
  return [...notices, notice].slice(-MAX_NOTICES);
}

export function noticeText(notice: RunNotice): string {
  const name = notice.name ?? `Simulation ${notice.simulationId}`;
  return notice.status === "completed" ? `${name} completed` : `${name} failed`;
}

/** A hidden tab's title: the latest outcome in front of the page's own title. */
export function noticeTitle(notice: RunNotice, pageTitle: string): string {
  return `${notice.status === "completed" ? "✓" : "✗"} ${noticeText(notice)} · ${pageTitle}`;
}
