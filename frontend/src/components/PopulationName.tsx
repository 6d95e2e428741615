import { useEffect, useState } from "react";
import { type ApiClient, type ApiError, isUnauthorized } from "../api/client";
import type { Population } from "../api/types";
import { hostedText } from "../state/populations";
import { Link } from "./Link";

/**
 * A population named the same way on every page: "education-study #3", with hosted vs size
 * when it is degraded, and said to be deleted when it is gone. Runs, sweeps and agents carry
 * only a population id; `usePopulations` loads what these names need.
 */

/** What a page knows of a population: the row, "missing" (the manager has no such id), or
 * undefined while it loads (or could not be loaded): then the id alone is shown. */
export type KnownPopulation = Population | "missing" | undefined;

// Up to this many distinct ids are fetched one by one; more, and one paged list is cheaper.
const ONE_BY_ONE = 20;

interface PopulationNameProps {
  id: number;
  population: KnownPopulation;
  /** Where the name leads: the population's page unless a page wants another view of it. */
  href?: string;
  /** Leave out the degraded note (breadcrumbs). */
  compact?: boolean;
}

export function PopulationName({ id, population, href = `/populations/${id}`, compact = false }: PopulationNameProps) {
  if (population === "missing") return <span className="muted">population {id} (deleted)</span>;
  if (population?.status === "deleted") {
    return (
      <span className="muted">
        {population.name} #{id} (deleted)
      </span>
    );
  }
  return (
    <>
      <Link href={href}>{population?.name ?? `Population ${id}`}</Link>
      {population && <span className="muted"> #{id}</span>}
      {!compact && population?.status === "degraded" && <span className="hosting-note">{hostedText(population)}</span>}
    </>
  );
}

/** A population as plain text, for where no markup fits (a select's options). */
export function populationLabel(population: KnownPopulation, id: number): string {
  if (population === "missing") return `population ${id} (deleted)`;
  if (population === undefined) return `#${id}`;
  return population.status === "deleted" ? `${population.name} (deleted)` : population.name;
}

/** Several populations, comma-separated (a sweep's). */
export function PopulationList({ ids, populations }: { ids: readonly number[]; populations: ReadonlyMap<number, Population | "missing"> }) {
  return (
    <>
      {ids.map((id, i) => (
        <span key={id}>
          {i > 0 && ", "}
          <PopulationName id={id} population={populations.get(id)} />
        </span>
      ))}
    </>
  );
}

/** The list's populations by id, and each wanted id it lacks as "missing"; a truncated list
 * proves nothing about the ids it does not hold, so those stay unknown. */
export function knownFromList(populations: readonly Population[], truncated: boolean, wanted: readonly number[]): Map<number, Population | "missing"> {
  const byId = new Map<number, Population | "missing">(populations.map((p) => [p.id, p] as const));
  if (!truncated) for (const id of wanted) if (!byId.has(id)) byId.set(id, "missing");
  return byId;
}

/** The populations of `ids` (deleted ones too), by id; an id the manager does not know maps
 * to "missing". Loaded again when the set of ids changes. */
export function usePopulations(
  client: ApiClient,
  ids: readonly number[],
  onUnauthorized?: (err: ApiError) => void,
): ReadonlyMap<number, Population | "missing"> {
  const key = [...new Set(ids)].sort((a, b) => a - b).join(",");
  const [known, setKnown] = useState<ReadonlyMap<number, Population | "missing">>(new Map());

  useEffect(() => {
    if (!key) return;
    const wanted = key.split(",").map(Number);
    const mine = new AbortController();
    const failed = (err: unknown) => {
      if (!mine.signal.aborted && onUnauthorized && isUnauthorized(err)) onUnauthorized(err);
      // Otherwise the names fall back to ids; the page works without them.
    };
    if (wanted.length <= ONE_BY_ONE) {
      void Promise.all(
        wanted.map((id) =>
          client.population(id, mine.signal).then(
            (p): [number, Population | "missing"] => [id, p],
            (err: unknown): [number, Population | "missing"] | null => {
              if ((err as ApiError).status === 404) return [id, "missing"];
              failed(err);
              return null;
            },
          ),
        ),
      ).then((entries) => {
        if (!mine.signal.aborted) setKnown(new Map(entries.filter((e) => e !== null)));
      });
    } else {
      client.allPopulations({ includeDeleted: true, signal: mine.signal }).then(({ populations, truncated }) => {
        if (!mine.signal.aborted) setKnown(knownFromList(populations, truncated, wanted));
      }, failed);
    }
    return () => mine.abort();
  }, [client, key, onUnauthorized]);

  return known;
}
