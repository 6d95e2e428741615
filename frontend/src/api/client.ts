// The manager's REST API as the app shell and several pages share it. Each call goes through
// the typed client (typedApi.ts): its path is a key of the generated `paths`, its parameters and
// answer are checked against the OpenAPI document; answers are narrowed to types.ts's shapes.
// A call one page makes lives with that page (or in a small module beside this one: rounds.ts,
// simulationList.ts, plugins.ts), so the first page loads only what it uses (test_page_weight).
import type {
  AgentDecisionPage,
  AgentFilters,
  AgentPage,
  ApiInfo,
  CleanWorkerResult,
  ClusterHistory,
  ExportFormat,
  GroupExportFormat,
  GroupPage,
  GroupSeries,
  Population,
  PopulationDetail,
  PopulationPage,
  Simulation,
  SimulationDetail,
  Worker,
  WorkerPage,
} from "./types";
import { type FetchLike, type TypedApi, answer, createTypedApi, yamlBody } from "./typedApi";

export { ApiError, NetworkError, errorMessage, isUnauthorized } from "./errors";
export type { FetchLike } from "./typedApi";

/** The manager's REST API for the dashboard, authenticated with the API token. */
export class ApiClient {
  /** The typed client itself, for the pages and modules that own their endpoints. */
  readonly api: TypedApi;

  constructor(token: string, fetchImpl: FetchLike = (input, init) => fetch(input, init)) {
    this.api = createTypedApi(token, fetchImpl);
  }

  info(signal?: AbortSignal): Promise<ApiInfo> {
    return answer(this.api.GET("/api/info", { signal })) as Promise<ApiInfo>;
  }

  workersPage(after: number | null, limit: number, signal?: AbortSignal): Promise<WorkerPage> {
    return answer(this.api.GET("/api/workers", { params: { query: { limit, after } }, signal })) as Promise<WorkerPage>;
  }

  /**
   * All workers, following `next_after` for at most `maxPages` pages so a huge
   * cluster cannot stall the page; `truncated` says whether more were left.
   */
  async allWorkers(
    options: { pageSize?: number; maxPages?: number; signal?: AbortSignal } = {},
  ): Promise<{ workers: Worker[]; truncated: boolean }> {
    // The largest page the API serves: a 1,000-process fleet is one request, not five in a row.
    const pageSize = options.pageSize ?? 1000;
    const maxPages = options.maxPages ?? 10;
    const workers: Worker[] = [];
    let after: number | null = null;
    for (let page = 0; page < maxPages; page++) {
      const result: WorkerPage = await this.workersPage(after, pageSize, options.signal);
      workers.push(...result.items);
      if (result.next_after === null || result.next_after === undefined) {
        return { workers, truncated: false };
      }
      after = result.next_after;
    }
    return { workers, truncated: true };
  }

  // Cluster actions, populations and agents.

  clusterHistory(signal?: AbortSignal): Promise<ClusterHistory> {
    return answer(this.api.GET("/api/cluster/history", { signal }));
  }

  drainWorker(id: number): Promise<Worker> {
    return answer(this.api.POST("/api/workers/{worker_id}/drain", { params: { path: { worker_id: id } } })) as Promise<Worker>;
  }

  undrainWorker(id: number): Promise<Worker> {
    return answer(this.api.POST("/api/workers/{worker_id}/undrain", { params: { path: { worker_id: id } } })) as Promise<Worker>;
  }

  async removeWorker(id: number): Promise<void> {
    await this.api.DELETE("/api/workers/{worker_id}", { params: { path: { worker_id: id } } });
  }

  removeWorkerAgents(id: number): Promise<CleanWorkerResult> {
    return answer(this.api.DELETE("/api/workers/{worker_id}/agents", { params: { path: { worker_id: id } } }));
  }

  /** The editor's text goes as is: the manager reads YAML (and JSON) and answers 422 with `loc`s into it. */
  createPopulation(configText: string): Promise<Population> {
    return answer(this.api.POST("/api/populations", yamlBody(configText))) as Promise<Population>;
  }

  populationsPage(page: ClientPage & { includeDeleted?: boolean }): Promise<PopulationPage> {
    const query = { limit: page.limit, after: page.after, include_deleted: page.includeDeleted || undefined };
    return answer(this.api.GET("/api/populations", { params: { query }, signal: page.signal })) as Promise<PopulationPage>;
  }

  /** Every population (not deleted ones unless asked), bounded like allWorkers. */
  async allPopulations(
    options: { includeDeleted?: boolean; pageSize?: number; maxPages?: number; signal?: AbortSignal } = {},
  ): Promise<{ populations: Population[]; truncated: boolean }> {
    const populations: Population[] = [];
    let after: number | null = null;
    for (let page = 0; page < (options.maxPages ?? 10); page++) {
      const result: PopulationPage = await this.populationsPage({
        after,
        limit: options.pageSize ?? 200,
        includeDeleted: options.includeDeleted,
        signal: options.signal,
      });
      populations.push(...result.items);
      if (result.next_after === null || result.next_after === undefined) return { populations, truncated: false };
      after = result.next_after;
    }
    return { populations, truncated: true };
  }

  population(id: number, signal?: AbortSignal): Promise<PopulationDetail> {
    const params = { path: { population_id: id } };
    return answer(this.api.GET("/api/populations/{population_id}", { params, signal })) as Promise<PopulationDetail>;
  }

  /**
   * Host every agent again now: restore what live workers lost and re-place the agents of
   * offline or removed workers onto online workers with room. Answers with the population
   * afterwards (still degraded when room ran out); 409 unless it is deployed or degraded.
   */
  repairPopulation(id: number): Promise<Population> {
    const params = { path: { population_id: id } };
    return answer(this.api.POST("/api/populations/{population_id}/repair", { params })) as Promise<Population>;
  }

  agentsPage(filters: AgentFilters, page: ClientPage): Promise<AgentPage> {
    const query = { ...filters, after: page.after, limit: page.limit };
    return answer(this.api.GET("/api/agents", { params: { query }, signal: page.signal })) as Promise<AgentPage>;
  }

  /** The agent's decisions across simulations, newest simulation first, one keyset page. */
  agentDecisions(id: number, page: { after: string | null; limit: number; signal?: AbortSignal }): Promise<AgentDecisionPage> {
    const params = { path: { agent_id: id }, query: { after: page.after, limit: page.limit } };
    return answer(this.api.GET("/api/agents/{agent_id}/decisions", { params, signal: page.signal })) as Promise<AgentDecisionPage>;
  }

  // Simulations.

  /** The launch form's config as JSON; 422 locs name its fields, 409 says why the population cannot play. */
  createSimulation(config: object): Promise<Simulation> {
    // The form builds the config loosely; the manager validates it and names what is wrong.
    return answer(this.api.POST("/api/simulations", { body: config as never })) as Promise<Simulation>;
  }

  simulation(id: number, signal?: AbortSignal): Promise<SimulationDetail> {
    const params = { path: { simulation_id: id } };
    // Its `config` is typed by hand (StoredSimulationConfig); the API types it as any JSON object.
    return answer(this.api.GET("/api/simulations/{simulation_id}", { params, signal })) as Promise<unknown> as Promise<SimulationDetail>;
  }

  /** Stop after dropping the round in flight; 409 unless pending or running. */
  pauseSimulation(id: number): Promise<Simulation> {
    const params = { path: { simulation_id: id } };
    return answer(this.api.POST("/api/simulations/{simulation_id}/pause", { params })) as Promise<Simulation>;
  }

  /**
   * A paused or failed run goes on from the round after its last kept one; 409 says why it
   * cannot. No API keys: the workers read them from their own environment (api_key_env).
   */
  resumeSimulation(id: number): Promise<Simulation> {
    const params = { path: { simulation_id: id } };
    return answer(this.api.POST("/api/simulations/{simulation_id}/resume", { params })) as Promise<Simulation>;
  }

  /**
   * The decisions export as a Blob, fetched with the token in the Authorization header: the
   * API accepts nothing else, and a token in a URL would end up in access logs and history.
   */
  async exportDecisions(id: number, format: ExportFormat, round: number | null = null): Promise<{ blob: Blob; filename: string }> {
    const params = { path: { simulation_id: id }, query: { format, round } };
    const { data, response } = await this.api.GET("/api/simulations/{simulation_id}/decisions", { params, ...asFile(format) });
    return { blob: data as Blob, filename: exportFilename(response, `simulation-${id}-decisions`, format, round) };
  }

  /**
   * One round's group metrics, a keyset page of groups (`after`: the last group of the page
   * before); `round` null: the last round that kept them. `names` is empty for a run without.
   */
  groupsPage(id: number, page: { round: number | null; after: number | null; limit: number; signal?: AbortSignal }): Promise<GroupPage> {
    const params = { path: { simulation_id: id }, query: { round: page.round, after: page.after, limit: page.limit } };
    return answer(this.api.GET("/api/simulations/{simulation_id}/groups", { params, signal: page.signal })) as Promise<GroupPage>;
  }

  /** One group's metrics over every kept round, oldest first (following `next_after`). */
  async groupSeries(id: number, group: number, signal?: AbortSignal): Promise<GroupSeries> {
    const page = (after: number | null) => {
      const params = { path: { simulation_id: id, group }, query: { after, limit: 1000 } };
      return answer(this.api.GET("/api/simulations/{simulation_id}/groups/{group}", { params, signal })) as Promise<GroupSeries>;
    };
    let series = await page(null);
    while (series.next_after !== null && series.next_after !== undefined) {
      const more: GroupSeries = await page(series.next_after);
      series = { ...more, items: [...series.items, ...more.items] };
    }
    return series;
  }

  /** The group metrics export as a Blob, with the token in the header as exportDecisions. */
  async exportGroups(id: number, format: GroupExportFormat, round: number | null = null): Promise<{ blob: Blob; filename: string }> {
    const params = { path: { simulation_id: id }, query: { format, round } };
    const { data, response } = await this.api.GET("/api/simulations/{simulation_id}/groups/export", { params, ...asFile(format) });
    return { blob: data as Blob, filename: exportFilename(response, `simulation-${id}-groups`, format, round) };
  }
}

/** Request options for an export: asked for in its format, read as a Blob. */
function asFile(format: ExportFormat) {
  return { headers: { Accept: EXPORT_TYPES[format] }, parseAs: "blob" as const };
}

/** The name the manager gave an export (Content-Disposition), with `-round-N` for one round. */
function exportFilename(response: Response, fallback: string, format: string, round: number | null): string {
  const disposition = response.headers.get("Content-Disposition") ?? "";
  const named = /filename="([^"]+)"/.exec(disposition)?.[1];
  const suffix = round === null ? "" : `-round-${round}`;
  return named ? named.replace(/(\.[a-z]+)$/, `${suffix}$1`) : `${fallback}${suffix}.${format}`;
}

/** What each export format is sent as (backend/simulations/export.py and group_export.py FORMATS). */
const EXPORT_TYPES: Record<ExportFormat, string> = {
  csv: "text/csv",
  jsonl: "application/x-ndjson",
  parquet: "application/vnd.apache.parquet",
};

export interface ClientPage {
  after: number | null;
  limit: number;
  signal?: AbortSignal;
}
