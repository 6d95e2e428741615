import { useEffect, useState } from "react";
import type { ConnectionStatus } from "../api/events";
import { OFFLINE_AFTER_MS, connectionBadge } from "../state/connection";

/** navigator.onLine, followed. */
function useOnline(): boolean {
  const [online, setOnline] = useState(() => (typeof navigator === "undefined" ? true : navigator.onLine !== false));
  useEffect(() => {
    const update = () => setOnline(navigator.onLine !== false);
    window.addEventListener("online", update);
    window.addEventListener("offline", update);
    return () => {
      window.removeEventListener("online", update);
      window.removeEventListener("offline", update);
    };
  }, []);
  return online;
}

/** How long `status` has been reconnecting (0 otherwise), re-rendered once it passes OFFLINE_AFTER_MS. */
function useReconnectingMs(status: ConnectionStatus): number {
  const down = status === "reconnecting" || status === "stale";
  const [since, setSince] = useState<number | null>(null);
  const [, tick] = useState(0);
  useEffect(() => {
    if (!down) {
      setSince(null);
      return;
    }
    setSince((s) => s ?? Date.now());
    const timer = setTimeout(() => tick((n) => n + 1), OFFLINE_AFTER_MS + 50);
    return () => clearTimeout(timer);
  }, [down]);
  return down && since !== null ? Date.now() - since : 0;
}

/**
 * The live-updates badge: live, connecting, reconnecting, or offline (no network, the manager
 * unreachable over REST — `unreachable` — or the socket down for a while).
 */
export function ConnectionIndicator({ status, unreachable = false }: { status: ConnectionStatus; unreachable?: boolean }) {
  const online = useOnline();
  const reconnectingMs = useReconnectingMs(status);
  const badge = connectionBadge(status, { online, unreachable, reconnectingMs });
  return (
    <span className={`connection connection-${status} connection-${badge.tone}`} data-status={status} data-tone={badge.tone} role="status" aria-label="Live updates" title={badge.title}>
      <span className="dot" aria-hidden="true" />
      {badge.text}
    </span>
  );
}
