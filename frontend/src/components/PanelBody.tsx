import type { ReactNode } from "react";
import type { Panel } from "../hooks/usePanel";
import { panelView } from "../state/panel";
import { ErrorAlert } from "./ErrorAlert";
import { Skeleton } from "./Skeleton";

interface PanelBodyProps<T> {
  panel: Panel<T>;
  /** Said while loading ("Loading the sweep's runs…"). */
  loading: string;
  /** The placeholder while nothing has arrived (default: three grey lines). */
  skeleton?: ReactNode;
  children: (data: T) => ReactNode;
}

/** A panel's body by its state: a skeleton, the error with a Retry (over the last data, if any), or the data. */
export function PanelBody<T>({ panel, loading, skeleton, children }: PanelBodyProps<T>) {
  const { state, reload } = panel;
  const view = panelView(state);
  if (view === "skeleton") return <>{skeleton ?? <Skeleton label={loading} />}</>;
  return (
    <>
      {view === "error" && <ErrorAlert message={state.error} onRetry={() => void reload()} />}
      {state.data !== null && children(state.data)}
    </>
  );
}
