import type { ConnectionStatus } from "../api/events";

const TEXT: Record<ConnectionStatus, string> = {
  connecting: "connecting…",
  live: "live",
  reconnecting: "reconnecting…",
  // Nothing heard for two keep-alive intervals: the socket is dropped and reopened.
  stale: "reconnecting…",
  closed: "disconnected",
};

export function ConnectionIndicator({ status }: { status: ConnectionStatus }) {
  return (
    <span className={`connection connection-${status}`} data-status={status} role="status" aria-label="Live updates" title="Live updates from the manager">
      <span className="dot" aria-hidden="true" />
      {TEXT[status]}
    </span>
  );
}
