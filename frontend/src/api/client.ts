import type { ApiInfo, Worker, WorkerPage } from "./types";

/** An HTTP error answer from the manager, with its `detail` when it sent one. */
export class ApiError extends Error {
  readonly status: number;
  readonly detail: string;

  constructor(status: number, detail: string) {
    super(`HTTP ${status}: ${detail}`);
    this.name = "ApiError";
    this.status = status;
    this.detail = detail;
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
      throw new ApiError(response.status, describeDetail(body, response.statusText || "request failed"));
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
}

export function isUnauthorized(err: unknown): err is ApiError {
  return err instanceof ApiError && err.unauthorized;
}

export function errorMessage(err: unknown): string {
  if (err instanceof ApiError) return `The manager answered HTTP ${err.status}: ${err.detail}`;
  if (err instanceof Error) return err.message;
  return String(err);
}
