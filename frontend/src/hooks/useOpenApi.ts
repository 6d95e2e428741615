import { useEffect, useState } from "react";
import type { ApiClient } from "../api/client";
import type { JsonSchema } from "../state/schemaForm";

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
      pending = client.openApiDocument();
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
