import { useCallback, useEffect, useRef, useState } from "react";
import type { ApiClient, ApiError } from "../api/client";
import type { EventMessage } from "../api/types";
import { useEventStream } from "../hooks/useEventStream";
import { type RunNotice, addNotice, noticeFromEvent, noticeText, noticeTitle } from "../state/runNotices";
import { Link } from "./Link";

const TOPICS = ["simulation:*"];
const NO_SNAPSHOT = () => {};

/**
 * Says when a run completes or fails while you are on another page: a notice in the corner
 * (until dismissed) with a link to the run, and, while the tab is hidden, the outcome in front
 * of the tab's title (taken back when you return). Listens to the runs' simulation.updated events.
 */
export function RunNotices({ client, token, path, onUnauthorized }: { client: ApiClient; token: string; path: string; onUnauthorized: (err: ApiError) => void }) {
  const [notices, setNotices] = useState<RunNotice[]>([]);
  const pathRef = useRef(path);
  pathRef.current = path;
  // The title a hidden tab had before a notice changed it, and the one we set.
  const titles = useRef<{ page: string; shown: string; key: string } | null>(null);

  const show = useCallback((notice: RunNotice) => {
    setNotices((current) => addNotice(current, notice));
    if (document.hidden) {
      const page = titles.current?.page ?? document.title;
      const shown = noticeTitle(notice, page);
      titles.current = { page, shown, key: notice.key };
      document.title = shown;
    }
  }, []);

  const onEvents = useCallback(
    (events: EventMessage[]) => {
      for (const event of events) {
        const notice = noticeFromEvent(event, pathRef.current);
        if (!notice) continue;
        show(notice);
        // The event has no name: fetch it, and keep the id if that fails.
        client.simulation(notice.simulationId).then(
          (run) => {
            const named = { ...notice, name: run.name ?? null };
            setNotices((current) => current.map((n) => (n.key === notice.key ? named : n)));
            // The hidden tab's title says the run by name too, once known.
            const shownTitle = titles.current;
            if (shownTitle?.key === notice.key && document.title === shownTitle.shown) {
              const shown = noticeTitle(named, shownTitle.page);
              titles.current = { ...shownTitle, shown };
              document.title = shown;
            }
          },
          () => {},
        );
      }
    },
    [client, show],
  );
  useEventStream(client, token, TOPICS, { onEvents, onResync: NO_SNAPSHOT }, onUnauthorized);

  useEffect(() => {
    const onVisible = () => {
      if (document.hidden || !titles.current) return;
      // A page that retitled itself meanwhile keeps its own title.
      if (document.title === titles.current.shown) document.title = titles.current.page;
      titles.current = null;
    };
    document.addEventListener("visibilitychange", onVisible);
    return () => document.removeEventListener("visibilitychange", onVisible);
  }, []);

  // The run's own page shows its outcome: opening it clears its notice.
  useEffect(() => setNotices((current) => (current.some((n) => path === `/simulations/${n.simulationId}`) ? current.filter((n) => path !== `/simulations/${n.simulationId}`) : current)), [path]);

  const dismiss = (key: string) => setNotices((current) => current.filter((n) => n.key !== key));
  return (
    // Always in the page, so screen readers hear notices added to it.
    <div className="run-notices" aria-live="polite">
      {notices.map((notice) => (
        <div key={notice.key} className={`run-notice run-notice-${notice.status}`}>
          <p>
            <strong>{noticeText(notice)}</strong>
            {notice.error && <span className="run-notice-error">{notice.error}</span>}
          </p>
          <div className="run-notice-actions">
            <Link href={`/simulations/${notice.simulationId}`}>Open the run</Link>
            <button type="button" className="button small" aria-label={`Dismiss: ${noticeText(notice)}`} onClick={() => dismiss(notice.key)}>
              Dismiss
            </button>
          </div>
        </div>
      ))}
    </div>
  );
}
