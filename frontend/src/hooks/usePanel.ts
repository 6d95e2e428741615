import { type DependencyList, useCallback, useEffect, useReducer, useRef } from "react";
import { type ApiError, isUnauthorized } from "../api/client";
import { type PanelState, failureText, initialPanel, isUnreachable, panelReducer } from "../state/panel";

export interface Panel<T> {
  state: PanelState<T>;
  /** Loads again (Retry, or a refresh): aborts a load still running; keeps the data shown. */
  reload: () => Promise<void>;
}

/**
 * A panel's own load (state/panel.ts): `load` runs when the component mounts and when one of
 * `deps` changes (which must list everything `load` reads); `reload` runs it again. A 401 goes
 * to `onUnauthorized`; any other failure is "`failure`: why", shown with a Retry.
 */
export function usePanel<T>(
  load: (signal: AbortSignal) => Promise<T>,
  deps: DependencyList,
  options: { failure: string; onUnauthorized: (err: ApiError) => void },
): Panel<T> {
  const [state, dispatch] = useReducer(panelReducer<T>, undefined, initialPanel<T>);
  const controller = useRef<AbortController | null>(null);
  const latest = useRef({ load, options });
  latest.current = { load, options };

  const reload = useCallback(async () => {
    controller.current?.abort();
    const mine = new AbortController();
    controller.current = mine;
    dispatch({ type: "start" });
    try {
      const data = await latest.current.load(mine.signal);
      if (!mine.signal.aborted) dispatch({ type: "loaded", data });
    } catch (err) {
      if (mine.signal.aborted) return;
      const { failure, onUnauthorized } = latest.current.options;
      if (isUnauthorized(err)) onUnauthorized(err);
      else dispatch({ type: "failed", error: failureText(failure, err), unreachable: isUnreachable(err) });
    }
  }, []);

  useEffect(() => {
    void reload();
    return () => controller.current?.abort();
    // `deps` stand for `load`, a new function every render.
  }, [reload, ...deps]);

  return { state, reload };
}
