import { useEffect, useState } from "react";
import type { ApiClient } from "../api/client";
import { answer } from "../api/typedApi";
import type { JsonSchema } from "../state/schemaForm";

/**
 * The manager's OpenAPI document. The one path not in the generated `paths` (the document does
 * not list itself), so it is spelled here; it still goes through the typed client's middleware.
 */
export function fetchOpenApiDocument(client: ApiClient, signal?: AbortSignal): Promise<JsonSchema> {
  return answer(client.api.GET("/api/openapi.json" as never, { signal } as never)) as Promise<JsonSchema>;
}

// Fetched once per signed-in client: the config models' ranges and keys change only with the manager.
const documents = new WeakMap<ApiClient, Promise<JsonSchema>>();

/**
 * The manager's OpenAPI document (GET /api/openapi.json), where the forms read their config
 * models' ranges (min/max on inputs) and keys ("did you mean"); null until it arrives, or if it
 * cannot be had (the forms then work without it).
 */
export function useOpenApi(client: ApiClient): JsonSchema | null {
  const [doc, setDoc] = useState<JsonSchema | null>(null);
  useEffect(() => {
    let live = true;
    let pending = documents.get(client);
    if (!pending) {
      pending = fetchOpenApiDocument(client);
      documents.set(client, pending);
      pending.catch(() => documents.delete(client));
    }
    pending.then(
      (result) => live && setDoc(result),
      () => undefined,
    );
    return () => {
      live = false;
    };
  }, [client]);
  return doc;
}
