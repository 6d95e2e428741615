// The manager's REST API as a typed client: openapi-fetch over the generated `paths`
// (schema.d.ts, `make api-types`), so a path, its parameters and its answer are checked
// against the OpenAPI document at build time instead of being spelled by hand.
import createClient, { type Client, type Middleware } from "openapi-fetch";
import { apiErrorOf, networkErrorOf } from "./errors";
import type { paths } from "./schema";

export type TypedApi = Client<paths>;

/** The query parameters of a GET, as the generated `paths` types them. */
export type QueryOf<P extends keyof paths> = paths[P] extends { get: { parameters: { query?: infer Q } } } ? NonNullable<Q> : never;

/** How the client reaches the network: a path with its query, and the request's parts. */
export type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

/** The bearer token on every request, and JSON asked for unless the caller asks for a file. */
function bearerToken(token: string): Middleware {
  return {
    onRequest({ request }) {
      request.headers.set("Authorization", `Bearer ${token}`);
      if (!request.headers.has("Accept")) request.headers.set("Accept", "application/json");
    },
  };
}

/**
 * An HTTP error answer becomes an ApiError (its `detail`, and for a 422 the fields it names),
 * a fetch that threw a NetworkError: callers catch these, never look at `error` results.
 */
const apiErrors: Middleware = {
  async onResponse({ response }) {
    if (!response.ok) throw await apiErrorOf(response);
  },
  onError({ error }) {
    return networkErrorOf(error);
  },
};

// openapi-fetch builds a Request, and a Request needs an absolute URL: the page's origin, or
// a stand-in where there is none (unit tests). Only the path and query go on to `fetch`.
const ORIGIN = globalThis.location?.origin?.startsWith("http") ? globalThis.location.origin : "http://localhost";

/** Hands openapi-fetch's Request to `fetchImpl` as a same-origin path and its init. */
function through(fetchImpl: FetchLike): (request: Request) => Promise<Response> {
  return async (request) => {
    const url = new URL(request.url);
    const body = request.body === null ? undefined : await request.text();
    return fetchImpl(`${url.pathname}${url.search}`, { method: request.method, headers: request.headers, body, signal: request.signal });
  };
}

/** A query string of the parameters that have a value (null, undefined and "" are left out). */
export function serializeQuery(params: Record<string, unknown>): string {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) {
    if (value === null || value === undefined || value === "") continue;
    // A list goes comma-separated (`status=running,paused`), as the manager reads it.
    search.set(key, Array.isArray(value) ? value.join(",") : String(value));
  }
  return search.toString();
}

export function createTypedApi(token: string, fetchImpl: FetchLike): TypedApi {
  const api = createClient<paths>({ baseUrl: ORIGIN, fetch: through(fetchImpl), querySerializer: serializeQuery });
  api.use(bearerToken(token), apiErrors);
  return api;
}

/** The answer's body: the middleware threw for every error, so a result carries `data`. */
export async function answer<T>(call: Promise<{ data?: T }>): Promise<T> {
  return (await call).data as T;
}

/**
 * Request options that send `text` as YAML. The manager parses it and answers 422 with `loc`s
 * into it; the generated body type is the parsed config, which the text is not yet.
 */
export function yamlBody(text: string) {
  return { body: text as never, bodySerializer: (body: unknown) => body as string, headers: { "Content-Type": "application/yaml" } };
}
