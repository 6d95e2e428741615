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
  ValidationIssue,
  Worker,
  WorkerHistory,
  WorkerLogs,
  WorkerPage,
} from "./types";

/** An HTTP error answer from the manager, with its `detail` when it sent one. */
export class ApiError extends Error {
  readonly status: number;
  readonly detail: string;
  /** FastAPI's validation errors (HTTP 422), each with its `loc`; empty otherwise. */
  readonly issues: ValidationIssue[];

  constructor(status: number, detail: string, issues: ValidationIssue[] = []) {
    super(`HTTP ${status}: ${detail}`);
    this.name = "ApiError";
    this.status = status;
    this.detail = detail;
    this.issues = issues;
  }

  get unauthorized(): boolean {
    return this.status === 401;
  }
}

/** The request never got an HTTP answer (manager down, network gone). */
export class NetworkError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "NetworkError";
  }
}

function describeDetail(body: unknown, fallback: string): string {
  if (body && typeof body === "object" && "detail" in body) {
    const detail = (body as { detail: unknown }).detail;
    if (typeof detail === "string") return detail;
    // FastAPI validation errors: a list of {loc, msg}.
    if (Array.isArray(detail)) {
      return detail
        .map((d) => (d && typeof d === "object" && "msg" in d ? String((d as { msg: unknown }).msg) : String(d)))
        .join("; ");
    }
    return JSON.stringify(detail);
  }
  return fallback;
}

function validationIssues(body: unknown): ValidationIssue[] {
  const detail = body && typeof body === "object" ? (body as { detail?: unknown }).detail : undefined;
  if (!Array.isArray(detail)) return [];
  return detail.flatMap((d) => {
    if (!d || typeof d !== "object") return [];
    const { loc, msg, type, ctx } = d as { loc?: unknown; msg?: unknown; type?: unknown; ctx?: unknown };
    if (!Array.isArray(loc) || typeof msg !== "string") return [];
    const parts = loc.filter((p): p is string | number => typeof p === "string" || typeof p === "number");
    const bounds = ctx && typeof ctx === "object" && !Array.isArray(ctx) ? { ctx: ctx as Record<string, unknown> } : {};
    return [{ loc: parts, msg, ...(typeof type === "string" ? { type } : {}), ...bounds }];
  });
}

export type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

/** A typed client for the manager's REST API, authenticated with the API token. */
export class ApiClient {
  private readonly token: string;
  private readonly fetchImpl: FetchLike;

  constructor(token: string, fetchImpl: FetchLike = (input, init) => fetch(input, init)) {
    this.token = token;
    this.fetchImpl = fetchImpl;
  }

  /** The raw answer of an authenticated request; an HTTP error becomes an ApiError. */
  private async send(path: string, init: RequestInit, accept: string): Promise<Response> {
    const headers = new Headers(init.headers);
    headers.set("Authorization", `Bearer ${this.token}`);
    headers.set("Accept", accept);
    let response: Response;
    try {
      response = await this.fetchImpl(path, { ...init, headers });
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      throw new NetworkError(`Cannot reach the manager (${reason})`);
    }
    if (!response.ok) {
      const body = parseJson(await response.text());
      const detail = describeDetail(body, response.statusText || "request failed");
      throw new ApiError(response.status, detail, validationIssues(body));
    }
    return response;
  }

  /** An authenticated request whose body the caller reads as it streams (e.g. NDJSON). */
  openStream(path: string, init: RequestInit, accept: string): Promise<Response> {
    return this.send(path, init, accept);
  }

  async request<T>(path: string, init: RequestInit = {}): Promise<T> {
    const response = await this.send(path, init, "application/json");
    if (response.status === 204) return undefined as T;
    return parseJson(await response.text()) as T;
  }

  info(signal?: AbortSignal): Promise<ApiInfo> {
    return this.request<ApiInfo>("/api/info", { signal });
  }

  workersPage(after: number | null, limit: number, signal?: AbortSignal): Promise<WorkerPage> {
    const params = new URLSearchParams({ limit: String(limit) });
    if (after !== null) params.set("after", String(after));
    return this.request<WorkerPage>(`/api/workers?${params.toString()}`, { signal });
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
    return this.request<Worker>(`/api/workers/${id}`, { signal });
  }

  workerHistory(id: number, signal?: AbortSignal): Promise<WorkerHistory> {
    return this.request<WorkerHistory>(`/api/workers/${id}/history`, { signal });
  }

  clusterHistory(signal?: AbortSignal): Promise<ClusterHistory> {
    return this.request<ClusterHistory>("/api/cluster/history", { signal });
  }

  /** The worker's recent log lines, asked of its process: 503 when it is not running. */
  workerLogs(id: number, options: { limit?: number; level?: LogLevel; after?: number }, signal?: AbortSignal): Promise<WorkerLogs> {
    return this.request<WorkerLogs>(`/api/workers/${id}/logs${query(options)}`, { signal });
  }

  drainWorker(id: number): Promise<Worker> {
    return this.request<Worker>(`/api/workers/${id}/drain`, { method: "POST" });
  }

  undrainWorker(id: number): Promise<Worker> {
    return this.request<Worker>(`/api/workers/${id}/undrain`, { method: "POST" });
  }

  removeWorker(id: number): Promise<void> {
    return this.request<void>(`/api/workers/${id}`, { method: "DELETE" });
  }

  removeWorkerAgents(id: number): Promise<CleanWorkerResult> {
    return this.request<CleanWorkerResult>(`/api/workers/${id}/agents`, { method: "DELETE" });
  }

  /** The editor's text goes as is: the manager reads YAML (and JSON) and answers 422 with `loc`s into it. */
  createPopulation(configText: string): Promise<Population> {
    return this.request<Population>("/api/populations", {
      method: "POST",
      headers: { "Content-Type": "application/yaml" },
      body: configText,
    });
  }

  populationsPage(page: ClientPage & { includeDeleted?: boolean }): Promise<PopulationPage> {
    const q = query({ limit: page.limit, after: page.after, include_deleted: page.includeDeleted || undefined });
    return this.request<PopulationPage>(`/api/populations${q}`, { signal: page.signal });
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
    return this.request<PopulationDetail>(`/api/populations/${id}`, { signal });
  }

  /**
   * Host every agent again now: restore what live workers lost and re-place the agents of
   * offline or removed workers onto online workers with room. Answers with the population
   * afterwards (still degraded when room ran out); 409 unless it is deployed or degraded.
   */
  repairPopulation(id: number): Promise<Population> {
    return this.request<Population>(`/api/populations/${id}/repair`, { method: "POST" });
  }

  deletePopulation(id: number): Promise<Population> {
    return this.request<Population>(`/api/populations/${id}`, { method: "DELETE" });
  }

  agentsPage(filters: AgentFilters, page: ClientPage): Promise<AgentPage> {
    const q = query({ ...filters, after: page.after, limit: page.limit });
    return this.request<AgentPage>(`/api/agents${q}`, { signal: page.signal });
  }

  agent(id: number, signal?: AbortSignal): Promise<Agent> {
    return this.request<Agent>(`/api/agents/${id}`, { signal });
  }

  /** The agent's decisions across simulations, newest simulation first, one keyset page. */
  agentDecisions(id: number, page: { after: string | null; limit: number; signal?: AbortSignal }): Promise<AgentDecisionPage> {
    const q = query({ after: page.after, limit: page.limit });
    return this.request<AgentDecisionPage>(`/api/agents/${id}/decisions${q}`, { signal: page.signal });
  }

  // Simulations.

  /** The launch form's config as JSON; 422 locs name its fields, 409 says why the population cannot play. */
  createSimulation(config: object): Promise<Simulation> {
    return this.request<Simulation>("/api/simulations", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(config),
    });
  }

  simulationsPage(page: ClientPage & { populationId?: number; filters?: SimulationFilters; cursor?: string | null }): Promise<SimulationPage> {
    const q = query({ ...page.filters, limit: page.limit, after: page.after, cursor: page.cursor, population_id: page.populationId ?? page.filters?.population_id });
    return this.request<SimulationPage>(`/api/simulations${q}`, { signal: page.signal });
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
    return this.request<SimulationDetail>(`/api/simulations/${id}`, { signal });
  }

  cancelSimulation(id: number): Promise<Simulation> {
    return this.request<Simulation>(`/api/simulations/${id}/cancel`, { method: "POST" });
  }

  /** A finished run with its rounds and every decision; 409 while it is live (cancel it first). */
  deleteSimulation(id: number): Promise<void> {
    return this.request<void>(`/api/simulations/${id}`, { method: "DELETE" });
  }

  /** Stop after dropping the round in flight; 409 unless pending or running. */
  pauseSimulation(id: number): Promise<Simulation> {
    return this.request<Simulation>(`/api/simulations/${id}/pause`, { method: "POST" });
  }

  /**
   * A paused or failed run goes on from the round after its last kept one; 409 says why it
   * cannot. No API keys: the workers read them from their own environment (api_key_env).
   */
  resumeSimulation(id: number): Promise<Simulation> {
    return this.request<Simulation>(`/api/simulations/${id}/resume`, { method: "POST" });
  }

  /** One page of a run's timeline, oldest first, after the entry id `after`. */
  timeline(id: number, after: number | null, limit = 1000, signal?: AbortSignal): Promise<TimelinePage> {
    return this.request<TimelinePage>(`/api/simulations/${id}/timeline${query({ after, limit })}`, { signal });
  }

  /** Every round of a simulation (at most 1,000 a page; a simulation has at most 1,000). */
  async allRounds(id: number, signal?: AbortSignal): Promise<SimulationRound[]> {
    const rounds: SimulationRound[] = [];
    let after: number | null = null;
    for (;;) {
      const result: RoundPage = await this.request<RoundPage>(`/api/simulations/${id}/rounds${query({ after, limit: 1000 })}`, {
        signal,
      });
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
    const q = query({ format, round });
    const response = await this.send(`/api/simulations/${id}/decisions${q}`, {}, EXPORT_TYPES[format]);
    return { blob: await response.blob(), filename: exportFilename(response, `simulation-${id}-decisions`, format, round) };
  }

  /**
   * One round's group metrics, a keyset page of groups (`after`: the last group of the page
   * before); `round` null: the last round that kept them. `names` is empty for a run without.
   */
  groupsPage(id: number, page: { round: number | null; after: number | null; limit: number; signal?: AbortSignal }): Promise<GroupPage> {
    const q = query({ round: page.round, after: page.after, limit: page.limit });
    return this.request<GroupPage>(`/api/simulations/${id}/groups${q}`, { signal: page.signal });
  }

  /** One group's metrics over every kept round, oldest first (following `next_after`). */
  async groupSeries(id: number, group: number, signal?: AbortSignal): Promise<GroupSeries> {
    const path = `/api/simulations/${id}/groups/${group}`;
    let series = await this.request<GroupSeries>(`${path}${query({ limit: 1000 })}`, { signal });
    while (series.next_after !== null && series.next_after !== undefined) {
      const more: GroupSeries = await this.request<GroupSeries>(`${path}${query({ after: series.next_after, limit: 1000 })}`, { signal });
      series = { ...more, items: [...series.items, ...more.items] };
    }
    return series;
  }

  /** The group metrics export as a Blob, with the token in the header as exportDecisions. */
  async exportGroups(id: number, format: GroupExportFormat, round: number | null = null): Promise<{ blob: Blob; filename: string }> {
    const q = query({ format, round });
    const response = await this.send(`/api/simulations/${id}/groups/export${q}`, {}, EXPORT_TYPES[format]);
    return { blob: await response.blob(), filename: exportFilename(response, `simulation-${id}-groups`, format, round) };
  }
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

function parseJson(text: string): unknown {
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/** GET /api/simulations' filters and sort (`status` a comma list, `sort` e.g. "-created_at"). */
export interface SimulationFilters {
  q?: string;
  population_id?: string;
  status?: string;
  plugin?: string;
  sweep_id?: string;
  sort?: string;
}

export interface ClientPage {
  after: number | null;
  limit: number;
  signal?: AbortSignal;
}

function query(params: Record<string, string | number | boolean | null | undefined>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "") search.set(key, String(value));
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

export function isUnauthorized(err: unknown): err is ApiError {
  return err instanceof ApiError && err.unauthorized;
}

export function errorMessage(err: unknown): string {
  if (err instanceof ApiError) return `The manager answered HTTP ${err.status}: ${err.detail}`;
  if (err instanceof Error) return err.message;
  return String(err);
}
