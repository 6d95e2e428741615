import { useEffect, useState } from "react";
import { type ApiClient, type ApiError, isUnauthorized } from "../api/client";

/** A population's attributes and their categories (for "break down by" and level-k depths). */
export function usePopulationCategories(client: ApiClient, populationId: string, onUnauthorized: (err: ApiError) => void): Record<string, string[]> {
  const [categories, setCategories] = useState<Record<string, string[]>>({});
  useEffect(() => {
    const pid = Number(populationId);
    setCategories({});
    if (!pid) return;
    const controller = new AbortController();
    client.population(pid, controller.signal).then(
      (p) => setCategories(Object.fromEntries(Object.entries(p.counts ?? {}).map(([name, counts]) => [name, Object.keys(counts)]))),
      (err: unknown) => {
        if (!controller.signal.aborted && isUnauthorized(err)) onUnauthorized(err);
      },
    );
    return () => controller.abort();
  }, [client, populationId, onUnauthorized]);
  return categories;
}
