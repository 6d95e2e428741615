import { useState } from "react";
import type { ApiClient, ApiError } from "../api/client";
import type { Simulation } from "../api/types";
import { useFetched } from "./useFetched";

// The simulations offered: the population's newest ones (the API pages them).
const SIMULATIONS_SHOWN = 100;

export interface PopulationSimulations {
  /** Newest first; null while loading. */
  simulations: Simulation[] | null;
  /** The one picked, or the newest until one is; null when there is none. */
  simulationId: number | null;
  pick: (id: number) => void;
  error: string | null;
}

/** A population's newest simulations to choose one from (an agent's transcripts, its interviews). */
export function usePopulationSimulations(client: ApiClient, populationId: number, onUnauthorized: (err: ApiError) => void): PopulationSimulations {
  const [picked, setPicked] = useState<number | null>(null);
  const { data: simulations, error } = useFetched(
    (signal) =>
      client.simulationsPage({ populationId, after: null, limit: SIMULATIONS_SHOWN, signal }).then((result) => [...result.items].sort((a, b) => b.id - a.id)),
    [client, populationId],
    { failure: "Could not load the population's simulations", onUnauthorized },
  );
  return { simulations, simulationId: picked ?? simulations?.[0]?.id ?? null, pick: setPicked, error };
}
