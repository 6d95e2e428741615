import { useEffect, useRef, useState } from "react";
import { type ApiClient, type ApiError, isUnauthorized } from "../api/client";
import { type ConnectionStatus, EventStream, eventsProtocols, eventsUrl } from "../api/events";
import type { EventMessage } from "../api/types";

// Events are applied at most once per FLUSH_MS, in batches: a large cluster heartbeats many
// times a second. An event after a quiet spell is applied at once (a round completing shows
// without waiting out a batch window).
const FLUSH_MS = 100;

export interface EventStreamHandlers {
  /** A batch of new events, each once and in seq order. */
  onEvents: (events: EventMessage[]) => void;
  /** Load (or reload) the snapshot over REST; events already delivered are older than it. */
  onResync: () => void;
}

/**
 * Subscribes to `topics` for as long as the component is mounted. Reconnects resume from
 * the last seq, so a short outage costs no refetch; `onResync` is called on the first
 * connection and whenever the manager cannot replay what was missed.
 */
export function useEventStream(
  client: ApiClient,
  token: string,
  topics: readonly string[],
  handlers: EventStreamHandlers,
  onUnauthorized: (err: ApiError) => void,
): ConnectionStatus {
  const [status, setStatus] = useState<ConnectionStatus>("connecting");
  const handlersRef = useRef(handlers);
  handlersRef.current = handlers;
  const topicsKey = topics.join(",");

  useEffect(() => {
    let disposed = false;
    const queue: EventMessage[] = [];
    let flushTimer: ReturnType<typeof setTimeout> | null = null;
    let lastFlush = -Infinity;
    let snapshotRequested = false;

    const flush = () => {
      if (flushTimer !== null) {
        clearTimeout(flushTimer);
        flushTimer = null;
      }
      lastFlush = performance.now();
      if (queue.length > 0 && !disposed) handlersRef.current.onEvents(queue.splice(0));
    };
    const resync = () => {
      flush(); // older events first, so the snapshot lands on top of them
      snapshotRequested = true;
      if (!disposed) handlersRef.current.onResync();
    };

    const stream = new EventStream({
      url: (resume) => eventsUrl(window.location, topicsKey.split(","), resume),
      protocols: eventsProtocols(token),
      onEvent: (event) => {
        queue.push(event);
        flushTimer ??= setTimeout(flush, Math.max(0, lastFlush + FLUSH_MS - performance.now()));
      },
      onResync: resync,
      onStatus: (next, info) => {
        if (disposed) return;
        setStatus(next);
        if (next !== "reconnecting" || info.closeCode === undefined) return;
        if (!snapshotRequested) {
          // The socket could not open: still show the data (and learn of a bad token from REST).
          resync();
        } else if (info.closeCode === 1008 || !info.everOpened) {
          // The websocket gives no status code; ask the REST API whether the token still works.
          client.info().catch((err: unknown) => {
            if (!disposed && isUnauthorized(err)) onUnauthorized(err);
          });
        }
      },
    });
    stream.start();
    return () => {
      disposed = true;
      stream.stop();
      if (flushTimer !== null) clearTimeout(flushTimer);
    };
  }, [client, token, topicsKey, onUnauthorized]);

  return status;
}
