import { useCallback, useEffect, useRef, useState } from "react";
import { type ApiClient, type ApiError, errorMessage, isUnauthorized } from "../api/client";
import { answer } from "../api/typedApi";
import type { EventMessage, TimelinePage } from "../api/types";
import { formatTimestamp } from "../state/meters";
import { TableScroll } from "./TableScroll";
import { SHOWN_STEP, type TimelineState, addEntries, emptyTimeline, entriesFromEvents, entryTone, lastId, newestFirst } from "../state/timeline";

export interface RunTimelineFeed {
  state: TimelineState;
  error: string | null;
  /** Feed the page's event batches (it already follows the run's topic). */
  onEvents: (events: EventMessage[]) => void;
  /** Fetch what the store holds after the newest entry (first load, and after a resync). */
  reload: () => void;
}

/** The run's timeline: stored pages first, then `timeline.added` events as they come. */
export function useRunTimeline(client: ApiClient, simulationId: number, onUnauthorized: (err: ApiError) => void): RunTimelineFeed {
  const [state, setState] = useState<TimelineState>(emptyTimeline);
  const [error, setError] = useState<string | null>(null);
  const stateRef = useRef(state);
  stateRef.current = state;
  const loading = useRef<AbortController | null>(null);
  // A new callback identity from the page must not reload the timeline from scratch.
  const unauthorized = useRef(onUnauthorized);
  unauthorized.current = onUnauthorized;

  const reload = useCallback(() => {
    loading.current?.abort();
    const mine = new AbortController();
    loading.current = mine;
    void (async () => {
      let after = lastId(stateRef.current);
      try {
        for (;;) {
          const page = (await answer(
            client.api.GET("/api/simulations/{simulation_id}/timeline", { params: { path: { simulation_id: simulationId }, query: { after, limit: 1000 } }, signal: mine.signal }),
          )) as TimelinePage;
          if (mine.signal.aborted) return;
          setState((s) => addEntries(s, page.items));
          if (page.next_after === null || page.items.length === 0) break;
          after = page.next_after;
        }
        setError(null);
      } catch (err) {
        if (mine.signal.aborted) return;
        if (isUnauthorized(err)) unauthorized.current(err);
        else if ((err as ApiError).status !== 404) setError(`Could not load the timeline: ${errorMessage(err)}`);
      }
    })();
  }, [client, simulationId]);

  useEffect(() => {
    setState(emptyTimeline);
    stateRef.current = emptyTimeline;
    reload();
    return () => loading.current?.abort();
  }, [reload]);

  const onEvents = useCallback(
    (events: EventMessage[]) => {
      const entries = entriesFromEvents(events, simulationId);
      if (entries.length > 0) setState((s) => addEntries(s, entries));
    },
    [simulationId],
  );

  return { state, error, onEvents, reload };
}

/** What happened to the run, newest first, with when. */
export function RunTimeline({ feed }: { feed: RunTimelineFeed }) {
  const [shown, setShown] = useState(SHOWN_STEP);
  const entries = newestFirst(feed.state, shown);
  const hidden = feed.state.entries.length - entries.length;
  return (
    <section aria-labelledby="timeline-heading" data-testid="run-timeline">
      <div className="section-title">
        <h2 id="timeline-heading">Timeline</h2>
      </div>
      {feed.error !== null && (
        <p className="alert" role="alert">
          {feed.error}
        </p>
      )}
      {entries.length === 0 ? (
        <p className="empty">Nothing has happened to this run yet.</p>
      ) : (
        <TableScroll label="Timeline">
          <table className="data" aria-labelledby="timeline-heading">
            <thead>
              <tr>
                <th scope="col">Time</th>
                <th scope="col">What happened</th>
              </tr>
            </thead>
            <tbody>
              {entries.map((e) => (
                <tr key={e.id} data-kind={e.kind} data-tone={entryTone(e.kind)} data-testid="timeline-entry">
                  <td className="mono">
                    <time dateTime={e.time}>{formatTimestamp(e.time)}</time>
                  </td>
                  <td>{e.message}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableScroll>
      )}
      {(hidden > 0 || feed.state.truncated) && (
        <p className="muted">
          {hidden > 0 && (
            <button type="button" className="button plain small" onClick={() => setShown((n) => n + SHOWN_STEP)}>
              Show {Math.min(SHOWN_STEP, hidden)} earlier
            </button>
          )}
          {feed.state.truncated && " The oldest entries are not kept in this page; the API has them all."}
        </p>
      )}
    </section>
  );
}
