import type {
  Agent,
  AgentFilters,
  AgentPage,
  ApiInfo,
  CleanWorkerResult,
  Population,
  PopulationDetail,
  PopulationPage,
  ValidationIssue,
  Worker,
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
    const { loc, msg, type } = d as { loc?: unknown; msg?: unknown; type?: unknown };
    if (!Array.isArray(loc) || typeof msg !== "string") return [];
    const parts = loc.filter((p): p is string | number => typeof p === "string" || typeof p === "number");
    return [{ loc: parts, msg, ...(typeof type === "string" ? { type } : {}) }];
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

  async request<T>(path: string, init: RequestInit = {}): Promise<T> {
    const headers = new Headers(init.headers);
    headers.set("Authorization", `Bearer ${this.token}`);
    headers.set("Accept", "application/json");
    let response: Response;
    try {
      response = await this.fetchImpl(path, { ...init, headers });
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      throw new NetworkError(`Cannot reach the manager (${reason})`);
    }
    if (response.status === 204) return undefined as T;
    let body: unknown = null;
    const text = await response.text();
    if (text) {
      try {
        body = JSON.parse(text);
      } catch {
        body = null;
      }
    }
    if (!response.ok) {
      const detail = describeDetail(body, response.statusText || "request failed");
      throw new ApiError(response.status, detail, validationIssues(body));
    }
    return body as T;
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
    const pageSize = options.pageSize ?? 200;
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

  drainWorker(id: number): Promise<Worker> {
    return this.request<Worker>(`/api/workers/${id}/drain`, { method: "POST" });
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
