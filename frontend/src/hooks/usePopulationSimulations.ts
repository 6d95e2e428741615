import { useState } from "react";
import type { ApiClient, ApiError } from "../api/client";
import { simulationsPage } from "../api/simulationList";
import type { SimulationListItem } from "../api/types";
import { useFetched } from "./useFetched";

// The simulations offered: the population's newest ones (the API pages them).
const SIMULATIONS_SHOWN = 100;

export interface PopulationSimulations {
  /** Newest first; null while loading. */
  simulations: SimulationListItem[] | null;
  /** The one picked, or until one is the newest the caller prefers (else the newest); null when there is none. */
  simulationId: number | null;
  pick: (id: number) => void;
  error: string | null;
}

/** The run offered first: the newest one `prefer` accepts, else the newest. */
export function firstChoice(simulations: readonly SimulationListItem[] | null, prefer?: (s: SimulationListItem) => boolean): number | null {
  const newest = simulations?.[0];
  if (!simulations || newest === undefined) return null;
  return (prefer ? simulations.find(prefer) : undefined)?.id ?? newest.id;
}

/** A population's newest simulations to choose one from (an agent's transcripts, its interviews). */
export function usePopulationSimulations(
  client: ApiClient,
  populationId: number,
  onUnauthorized: (err: ApiError) => void,
  prefer?: (s: SimulationListItem) => boolean,
): PopulationSimulations {
  const [picked, setPicked] = useState<number | null>(null);
  const { data: simulations, error } = useFetched(
    (signal) =>
      simulationsPage(client, { populationId, after: null, limit: SIMULATIONS_SHOWN, signal }).then((result) => [...result.items].sort((a, b) => b.id - a.id)),
    [client, populationId],
    { failure: "Could not load the population's simulations", onUnauthorized },
  );
  return { simulations, simulationId: picked ?? firstChoice(simulations, prefer), pick: setPicked, error };
}
