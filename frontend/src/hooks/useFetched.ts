import { type DependencyList, useCallback, useEffect, useRef, useState } from "react";
import { type ApiError, errorMessage, isUnauthorized } from "../api/client";

interface FailureOptions {
  /** The start of the error shown when a load fails: "Could not load sweeps" → "Could not load sweeps: <why>". */
  failure: string;
  /** Called instead of showing an error when the API says the token is no good (401). */
  onUnauthorized: (err: ApiError) => void;
}

/** A 401 goes to `onUnauthorized`; any other failure is shown as "`failure`: why". */
function reportFailure(err: unknown, { failure, onUnauthorized }: FailureOptions, setError: (text: string) => void): void {
  if (isUnauthorized(err)) onUnauthorized(err);
  else setError(`${failure}: ${errorMessage(err)}`);
}

export interface Fetched<T> {
  /** The last load's answer; null before the first (and, with `clearOnReload`, while the next runs). */
  data: T | null;
  error: string | null;
}

/**
 * Calls `load` when the component mounts and again when one of `deps` changes, like useEffect:
 * `deps` must list everything `load` (and the failure text) reads, and nothing else starts a
 * load, so a re-render never refetches. The load before is aborted and its answer dropped.
 * `load` null loads nothing (and keeps what is shown). A success sets `data` and clears `error`;
 * a failure keeps `data`. With `clearOnReload`, `data` is null again while a new load runs.
 */
export function useFetched<T>(
  load: ((signal: AbortSignal) => Promise<T>) | null,
  deps: DependencyList,
  options: FailureOptions & { clearOnReload?: boolean },
): Fetched<T> {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    if (load === null) return;
    const controller = new AbortController();
    if (options.clearOnReload) setData(null);
    load(controller.signal).then(
      (result) => {
        if (controller.signal.aborted) return;
        setData(result);
        setError(null);
      },
      (err: unknown) => {
        if (!controller.signal.aborted) reportFailure(err, options, setError);
      },
    );
    return () => controller.abort();
    // The caller's `deps` stand for `load`, a new function every render.
  }, [...deps, options.onUnauthorized]);

  return { data, error };
}

export interface Refetch {
  /**
   * Loads again, aborting a load still running; resolves when this one is done, to false if it
   * failed (true when it loaded or a newer load took over).
   */
  refetch: () => Promise<boolean>;
  error: string | null;
  /** For the page's other failures, shown in the same place. */
  setError: (error: string | null) => void;
}

/**
 * A `refetch` for pages that load a list again on demand (on a stale event stream, after an
 * action): `load` then `onLoaded` with its answer, unless a newer refetch, a change of `deps` or
 * unmounting aborted it. `refetch` is a new function only when one of `deps` (what `load`,
 * `onLoaded` and the failure text read) changes, so effects may depend on it without looping.
 */
export function useRefetch<T>(
  load: (signal: AbortSignal) => Promise<T>,
  onLoaded: (result: T) => void,
  deps: DependencyList,
  options: FailureOptions,
): Refetch {
  const [error, setError] = useState<string | null>(null);
  const controller = useRef<AbortController | null>(null);

  // A load for the old deps (or for a page that went away) is of no use any more.
  useEffect(() => () => controller.current?.abort(), [...deps, options.onUnauthorized]);

  const refetch = useCallback(async () => {
    controller.current?.abort();
    const mine = new AbortController();
    controller.current = mine;
    try {
      const result = await load(mine.signal);
      if (mine.signal.aborted) return true;
      onLoaded(result);
      setError(null);
      return true;
    } catch (err) {
      if (mine.signal.aborted) return true;
      reportFailure(err, options, setError);
      return false;
    }
    // The caller's `deps` stand for `load` and `onLoaded`, new functions every render.
  }, [...deps, options.onUnauthorized]);

  return { refetch, error, setError };
}
