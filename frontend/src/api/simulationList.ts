// GET /api/simulations: the runs table, a population's runs and a sweep's, filtered and sorted
// by the manager. Apart from client.ts so only the pages that list runs load it.
import type { ApiClient, ClientPage } from "./client";
import { type QueryOf, answer } from "./typedApi";
import type { SimulationListItem, SimulationPage } from "./types";

/** GET /api/simulations' filters and sort (`status` a comma list, `sort` e.g. "-created_at"). */
export interface SimulationFilters {
  q?: string;
  population_id?: string;
  status?: string;
  plugin?: string;
  sweep_id?: string;
  sort?: string;
}

type SimulationsQuery = QueryOf<"/api/simulations">;
type ListPage = ClientPage & { populationId?: number; filters?: SimulationFilters; cursor?: string | null };

export function simulationsPage(client: ApiClient, page: ListPage): Promise<SimulationPage> {
  const query = simulationsQuery(page);
  return answer(client.api.GET("/api/simulations", { params: { query }, signal: page.signal })) as Promise<SimulationPage>;
}

/** Every simulation matching `filters` in their `sort` order (following next_cursor), bounded like allWorkers. */
export async function allSimulations(
  client: ApiClient,
  options: { filters?: SimulationFilters; pageSize?: number; maxPages?: number; signal?: AbortSignal } = {},
): Promise<{ simulations: SimulationListItem[]; truncated: boolean }> {
  const simulations: SimulationListItem[] = [];
  let cursor: string | null = null;
  for (let page = 0; page < (options.maxPages ?? 10); page++) {
    const result: SimulationPage = await simulationsPage(client, { after: null, cursor, filters: options.filters, limit: options.pageSize ?? 200, signal: options.signal });
    simulations.push(...result.items);
    if (!result.next_cursor) return { simulations, truncated: false };
    cursor = result.next_cursor;
  }
  return { simulations, truncated: true };
}

/** The list's query: the filters as the page holds them (text), in the API's types. */
function simulationsQuery(page: ListPage): SimulationsQuery {
  const { q, population_id, status, plugin, sweep_id, sort } = page.filters ?? {};
  return {
    q,
    status: status ? status.split(",") : undefined,
    plugin,
    sweep_id: optionalNumber(sweep_id),
    sort: sort as SimulationsQuery["sort"],
    limit: page.limit,
    after: page.after,
    cursor: page.cursor,
    population_id: page.populationId ?? optionalNumber(population_id),
  };
}

function optionalNumber(text: string | undefined): number | undefined {
  return text ? Number(text) : undefined;
}
