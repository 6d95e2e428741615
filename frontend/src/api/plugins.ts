import type { ApiClient } from "./client";
import { answer } from "./typedApi";
import type { Plugin, PluginPage } from "./types";

/** The installed plugins (fewer than a page's 1,000). */
export function fetchPlugins(client: ApiClient, signal?: AbortSignal): Promise<PluginPage> {
  return answer(client.api.GET("/api/plugins", { params: { query: { limit: 1000 } }, signal }));
}

export function fetchPlugin(client: ApiClient, name: string, signal?: AbortSignal): Promise<Plugin> {
  return answer(client.api.GET("/api/plugins/{name}", { params: { path: { name } }, signal }));
}
