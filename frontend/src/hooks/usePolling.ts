import { useEffect } from "react";

/**
 * Calls `tick` now and, with `everyMs`, again `everyMs` after each call ends (skipped while the
 * tab is hidden); a new `tick` or interval starts over; `enabled` false calls nothing. The
 * signal is aborted when the component goes away.
 */
export function usePolling(tick: (signal: AbortSignal) => Promise<void>, everyMs: number | null, enabled = true): void {
  useEffect(() => {
    if (!enabled) return;
    const controller = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const run = async () => {
      if (!document.hidden) await tick(controller.signal).catch(() => undefined);
      if (!controller.signal.aborted && everyMs !== null) timer = setTimeout(run, everyMs);
    };
    void run();
    return () => {
      controller.abort();
      clearTimeout(timer);
    };
  }, [tick, everyMs, enabled]);
}

/** How often to read a history of `bucketS`-second points: once a point, within 2 to 10 s. */
export function historyPollMs(bucketS: number | undefined): number {
  return Math.min(10_000, Math.max(2000, (bucketS ?? 5) * 1000));
}
