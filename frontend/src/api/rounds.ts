import type { ApiClient } from "./client";
import { answer } from "./typedApi";
import type { RoundPage, SimulationRound } from "./types";

/** Every round of a simulation (at most 1,000 a page; a simulation has at most 1,000). */
export async function allRounds(client: ApiClient, id: number, signal?: AbortSignal): Promise<SimulationRound[]> {
  const rounds: SimulationRound[] = [];
  let after: number | null = null;
  for (;;) {
    const params = { path: { simulation_id: id }, query: { after, limit: 1000 } };
    const result = (await answer(client.api.GET("/api/simulations/{simulation_id}/rounds", { params, signal }))) as RoundPage;
    rounds.push(...result.items);
    if (result.next_after === null || result.next_after === undefined) return rounds;
    after = result.next_after;
  }
}
