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
  /**
   * Load (or reload) the snapshot over REST; events already delivered are older than it. May
   * resolve to whether it loaded: a snapshot that did not (the network dropped mid-load) is
   * loaded again when the socket next opens, as a resumed socket replays only events.
   */
  onResync: () => void | Promise<boolean>;
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
    // The last snapshot asked for did not load; counted per request so a late answer to an
    // older one does not overwrite a newer one's.
    let snapshotFailed = false;
    let snapshotRequest = 0;

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
      snapshotFailed = false;
      if (disposed) return;
      const request = ++snapshotRequest;
      const failed = () => {
        if (request === snapshotRequest) snapshotFailed = true;
      };
      handlersRef.current.onResync()?.then((loaded) => {
        if (!loaded) failed();
      }, failed);
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
        if (next === "live" && snapshotFailed) resync(); // the manager answers again
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
