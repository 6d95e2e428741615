import { useSyncExternalStore } from "react";
import { formatAgo, parseServerTime } from "../format";

// One shared 1 s ticker: only the time cells re-render each second, not whole rows.
let now = Date.now();
const subscribers = new Set<() => void>();
let interval: ReturnType<typeof setInterval> | null = null;

function subscribe(listener: () => void): () => void {
  subscribers.add(listener);
  if (interval === null) {
    now = Date.now();
    interval = setInterval(() => {
      now = Date.now();
      for (const s of subscribers) s();
    }, 1000);
  }
  return () => {
    subscribers.delete(listener);
    if (subscribers.size === 0 && interval !== null) {
      clearInterval(interval);
      interval = null;
    }
  };
}

export function useNow(): number {
  return useSyncExternalStore(subscribe, () => now);
}

export function RelativeTime({ iso }: { iso: string }) {
  const nowMs = useNow();
  const ms = parseServerTime(iso);
  const title = Number.isNaN(ms) ? iso : new Date(ms).toLocaleString();
  return (
    <time dateTime={iso} title={title}>
      {formatAgo(iso, nowMs)}
    </time>
  );
}
