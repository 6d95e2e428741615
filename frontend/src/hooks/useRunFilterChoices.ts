import type { ApiClient, ApiError } from "../api/client";
import type { Plugin, Population } from "../api/types";
import { fetchPlugins } from "../api/plugins";
import { listSweeps, type Sweep } from "../state/sweeps";
import { useFetched } from "./useFetched";

export interface RunFilterChoices {
  /** Every population, deleted ones too (their runs stay), newest first. */
  populations: Population[];
  sweeps: Sweep[];
  /** The installed plugins (a run's plugin may since have been uninstalled: the page adds it). */
  plugins: Plugin[];
}

/** What the runs table's population, sweep and plugin filters offer, loaded once. */
export function useRunFilterChoices(client: ApiClient, onUnauthorized: (err: ApiError) => void): { choices: RunFilterChoices | null; error: string | null } {
  const { data, error } = useFetched(
    async (signal) => {
      const [populations, sweeps, plugins] = await Promise.all([
        client.allPopulations({ includeDeleted: true, signal }),
        listSweeps(client, signal, 1000),
        fetchPlugins(client, signal),
      ]);
      return {
        populations: [...populations.populations].sort((a, b) => b.id - a.id),
        sweeps,
        plugins: plugins.items,
      };
    },
    [client],
    { failure: "Could not load the filters' choices", onUnauthorized },
  );
  return { choices: data, error };
}
