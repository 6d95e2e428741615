import type { ValidationIssue } from "./types";

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

/** The ApiError for an answer that is not ok, read from its `{"detail": ...}` body. */
export async function apiErrorOf(response: Response): Promise<ApiError> {
  const body = parseJson(await response.text());
  const detail = describeDetail(body, response.statusText || "request failed");
  return new ApiError(response.status, detail, validationIssues(body));
}

/** The NetworkError for a fetch that threw instead of answering. */
export function networkErrorOf(err: unknown): NetworkError {
  const reason = err instanceof Error ? err.message : String(err);
  return new NetworkError(`Cannot reach the manager (${reason})`);
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

export function parseJson(text: string): unknown {
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return null;
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
