// The dashboard's calls to the manager, by what they do. Each goes through the typed client
// (typedApi.ts): its path is a key of the generated `paths`, its parameters and answer are
// checked against the OpenAPI document; the answers are narrowed to types.ts's shapes.
import type {
  Agent,
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
  LogLevel,
  Plugin,
  PluginPage,
  Population,
  PopulationDetail,
  PopulationPage,
  RoundPage,
  Simulation,
  SimulationDetail,
  SimulationListItem,
  SimulationPage,
  SimulationRound,
  TimelinePage,
  TranscriptPage,
  Worker,
  WorkerHistory,
  WorkerLogs,
  WorkerPage,
} from "./types";
import type { components } from "./schema";
import { type FetchLike, type QueryOf, type TypedApi, answer, createTypedApi, yamlBody } from "./typedApi";

export { ApiError, NetworkError, errorMessage, isUnauthorized } from "./errors";
export type { FetchLike } from "./typedApi";

type NeighbourPage = components["schemas"]["NeighbourPage"];

/** The manager's REST API for the dashboard, authenticated with the API token. */
export class ApiClient {
  /** The typed client itself, for state modules that own their endpoints (sweeps, interviews, ...). */
  readonly api: TypedApi;

  constructor(token: string, fetchImpl: FetchLike = (input, init) => fetch(input, init)) {
    this.api = createTypedApi(token, fetchImpl);
  }

  info(signal?: AbortSignal): Promise<ApiInfo> {
    return answer(this.api.GET("/api/info", { signal })) as Promise<ApiInfo>;
  }

  /**
   * The manager's OpenAPI document, where the forms read their config models' ranges. The one
   * path not in the generated `paths`: the document does not list itself.
   */
  openApiDocument(signal?: AbortSignal): Promise<Record<string, unknown>> {
    return answer(this.api.GET("/api/openapi.json" as never, { signal } as never)) as Promise<Record<string, unknown>>;
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

  worker(id: number, signal?: AbortSignal): Promise<Worker> {
    return answer(this.api.GET("/api/workers/{worker_id}", { params: { path: { worker_id: id } }, signal })) as Promise<Worker>;
  }

  workerHistory(id: number, signal?: AbortSignal): Promise<WorkerHistory> {
    return answer(this.api.GET("/api/workers/{worker_id}/history", { params: { path: { worker_id: id } }, signal }));
  }

  clusterHistory(signal?: AbortSignal): Promise<ClusterHistory> {
    return answer(this.api.GET("/api/cluster/history", { signal }));
  }

  /** The worker's recent log lines, asked of its process: 503 when it is not running. */
  workerLogs(id: number, options: { limit?: number; level?: LogLevel; after?: number }, signal?: AbortSignal): Promise<WorkerLogs> {
    return answer(this.api.GET("/api/workers/{worker_id}/logs", { params: { path: { worker_id: id }, query: options }, signal }));
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

  deletePopulation(id: number): Promise<Population> {
    const params = { path: { population_id: id } };
    return answer(this.api.DELETE("/api/populations/{population_id}", { params })) as Promise<Population>;
  }

  agentsPage(filters: AgentFilters, page: ClientPage): Promise<AgentPage> {
    const query = { ...filters, after: page.after, limit: page.limit };
    return answer(this.api.GET("/api/agents", { params: { query }, signal: page.signal })) as Promise<AgentPage>;
  }

  agent(id: number, signal?: AbortSignal): Promise<Agent> {
    return answer(this.api.GET("/api/agents/{agent_id}", { params: { path: { agent_id: id } }, signal })) as Promise<Agent>;
  }

  /** The agent's decisions across simulations, newest simulation first, one keyset page. */
  agentDecisions(id: number, page: { after: string | null; limit: number; signal?: AbortSignal }): Promise<AgentDecisionPage> {
    const params = { path: { agent_id: id }, query: { after: page.after, limit: page.limit } };
    return answer(this.api.GET("/api/agents/{agent_id}/decisions", { params, signal: page.signal })) as Promise<AgentDecisionPage>;
  }

  /** One page of the agent's neighbours in its population's graph, by id. */
  agentNeighbours(id: number, page: ClientPage): Promise<NeighbourPage> {
    const params = { path: { agent_id: id }, query: { limit: page.limit, after: page.after } };
    return answer(this.api.GET("/api/agents/{agent_id}/neighbors", { params, signal: page.signal }));
  }

  /** One page of the agent's transcripts in one simulation (transcripts.ts builds the query). */
  agentTranscripts(id: number, query: QueryOf<"/api/agents/{agent_id}/transcripts">, signal?: AbortSignal): Promise<TranscriptPage> {
    const params = { path: { agent_id: id }, query };
    return answer(this.api.GET("/api/agents/{agent_id}/transcripts", { params, signal })) as Promise<TranscriptPage>;
  }

  // Plugins.

  /** The installed plugins (fewer than a page's 1,000). */
  plugins(signal?: AbortSignal): Promise<PluginPage> {
    return answer(this.api.GET("/api/plugins", { params: { query: { limit: 1000 } }, signal }));
  }

  plugin(name: string, signal?: AbortSignal): Promise<Plugin> {
    return answer(this.api.GET("/api/plugins/{name}", { params: { path: { name } }, signal }));
  }

  // Simulations.

  /** The launch form's config as JSON; 422 locs name its fields, 409 says why the population cannot play. */
  createSimulation(config: object): Promise<Simulation> {
    // The form builds the config loosely; the manager validates it and names what is wrong.
    return answer(this.api.POST("/api/simulations", { body: config as never })) as Promise<Simulation>;
  }

  /** What the launch form's config would cost; 422 while it does not validate. */
  estimateSimulation(config: object, signal?: AbortSignal) {
    return answer(this.api.POST("/api/simulations/estimate", { body: config as never, signal }));
  }

  /**
   * Probe LLM endpoints from a worker hosting the population, as the run would call them. The
   * form builds the endpoints loosely; the manager validates them and names what is wrong.
   */
  testLlmEndpoints(populationId: number, endpoints: object[]) {
    const body = { population_id: populationId, endpoints } as components["schemas"]["LlmTestRequest"];
    return answer(this.api.POST("/api/llm/test", { body }));
  }

  simulationsPage(page: ClientPage & { populationId?: number; filters?: SimulationFilters; cursor?: string | null }): Promise<SimulationPage> {
    const query = simulationsQuery(page);
    return answer(this.api.GET("/api/simulations", { params: { query }, signal: page.signal })) as Promise<SimulationPage>;
  }

  /** Every simulation matching `filters` in their `sort` order (following next_cursor), bounded like allWorkers. */
  async allSimulations(
    options: { filters?: SimulationFilters; pageSize?: number; maxPages?: number; signal?: AbortSignal } = {},
  ): Promise<{ simulations: SimulationListItem[]; truncated: boolean }> {
    const simulations: SimulationListItem[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < (options.maxPages ?? 10); page++) {
      const result: SimulationPage = await this.simulationsPage({ after: null, cursor, filters: options.filters, limit: options.pageSize ?? 200, signal: options.signal });
      simulations.push(...result.items);
      if (!result.next_cursor) return { simulations, truncated: false };
      cursor = result.next_cursor;
    }
    return { simulations, truncated: true };
  }

  simulation(id: number, signal?: AbortSignal): Promise<SimulationDetail> {
    const params = { path: { simulation_id: id } };
    // Its `config` is typed by hand (StoredSimulationConfig); the API types it as any JSON object.
    return answer(this.api.GET("/api/simulations/{simulation_id}", { params, signal })) as Promise<unknown> as Promise<SimulationDetail>;
  }

  /** Stop the run; a `reason` (when given) is kept with it. */
  cancelSimulation(id: number, reason = ""): Promise<Simulation> {
    const params = { path: { simulation_id: id } };
    const body = reason ? { body: { reason } } : {};
    return answer(this.api.POST("/api/simulations/{simulation_id}/cancel", { params, ...body })) as Promise<Simulation>;
  }

  /** A finished run with its rounds and every decision; 409 while it is live (cancel it first). */
  async deleteSimulation(id: number): Promise<void> {
    await this.api.DELETE("/api/simulations/{simulation_id}", { params: { path: { simulation_id: id } } });
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

  /** The same population, config and seed again, as a new run; 409 says why not. */
  rerunSimulation(id: number): Promise<Simulation> {
    const params = { path: { simulation_id: id } };
    return answer(this.api.POST("/api/simulations/{simulation_id}/rerun", { params })) as Promise<Simulation>;
  }

  /** The run's reproducibility record, as the manager's JSON. */
  simulationRecord(id: number): Promise<unknown> {
    return answer(this.api.GET("/api/simulations/{simulation_id}/record", { params: { path: { simulation_id: id } } }));
  }

  /** One page of a run's transcripts, filtered (transcripts.ts builds the query). */
  simulationTranscripts(id: number, query: QueryOf<"/api/simulations/{simulation_id}/transcripts">, signal?: AbortSignal): Promise<TranscriptPage> {
    const params = { path: { simulation_id: id }, query };
    return answer(this.api.GET("/api/simulations/{simulation_id}/transcripts", { params, signal })) as Promise<TranscriptPage>;
  }

  /** One page of a run's timeline, oldest first, after the entry id `after`. */
  timeline(id: number, after: number | null, limit = 1000, signal?: AbortSignal): Promise<TimelinePage> {
    const params = { path: { simulation_id: id }, query: { after, limit } };
    return answer(this.api.GET("/api/simulations/{simulation_id}/timeline", { params, signal })) as Promise<TimelinePage>;
  }

  /** Every round of a simulation (at most 1,000 a page; a simulation has at most 1,000). */
  async allRounds(id: number, signal?: AbortSignal): Promise<SimulationRound[]> {
    const rounds: SimulationRound[] = [];
    let after: number | null = null;
    for (;;) {
      const params = { path: { simulation_id: id }, query: { after, limit: 1000 } };
      const result = (await answer(this.api.GET("/api/simulations/{simulation_id}/rounds", { params, signal }))) as RoundPage;
      rounds.push(...result.items);
      if (result.next_after === null || result.next_after === undefined) return rounds;
      after = result.next_after;
    }
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

/** The list's query: the filters as the page holds them (text), in the API's types. */
function simulationsQuery(page: ClientPage & { populationId?: number; filters?: SimulationFilters; cursor?: string | null }): SimulationsQuery {
  const { q, population_id, status, plugin, sweep_id, sort } = page.filters ?? {};
  const population = page.populationId ?? optionalNumber(population_id);
  return {
    q,
    status: status ? status.split(",") : undefined,
    plugin,
    sweep_id: optionalNumber(sweep_id),
    sort: sort as SimulationsQuery["sort"],
    limit: page.limit,
    after: page.after,
    cursor: page.cursor,
    population_id: population,
  };
}

function optionalNumber(text: string | undefined): number | undefined {
  return text ? Number(text) : undefined;
}

export interface ClientPage {
  after: number | null;
  limit: number;
  signal?: AbortSignal;
}
