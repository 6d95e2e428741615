import { useEffect, useId, useLayoutEffect, useRef, useState, type FormEvent } from "react";
import { type ApiClient, type ApiError, errorMessage, isUnauthorized } from "../api/client";
import type { Agent, AgentFilters } from "../api/types";
import { setSearchParams } from "../router";
import { agentNumber } from "../state/agents";
import { ErrorAlert } from "./ErrorAlert";
import { Link } from "./Link";
import { SkeletonRows } from "./Skeleton";

const PAGE_SIZE = 25;
// The page after the one on screen is fetched ahead; kept this long and this many.
const PREFETCH_TTL_MS = 30_000;
const PREFETCH_KEEP = 8;

type Page = { items: Agent[]; next: number | null };

function pageKey(filters: AgentFilters, after: number | null, reloadKey: number): string {
  return JSON.stringify([filters, after, reloadKey]);
}

interface AgentBrowserProps {
  client: ApiClient;
  populationId: number;
  /** Worker ids that host agents of the population, for the worker filter. */
  workerIds: number[];
  /** Distribution -> its categories, for the attribute filter. */
  categories: Record<string, string[]>;
  /** Bumped by the parent when the population changed (deployed, deleted): reload the page. */
  reloadKey: number;
  /** The population is being deployed: its agents are not stored yet (not "no agents match"). */
  deploying?: boolean;
  onUnauthorized: (err: ApiError) => void;
}

/** What the URL says the browser shows: `?worker=2&attr=education:bachelor&page=3&after=41` or
 * `?from=500000` (went to an agent number). Read once at mount; written on every change. */
export interface AgentBrowserUrl {
  worker: string;
  attribute: string;
  value: string;
  page: number;
  after: number | null;
  from: number | null;
}

export function readAgentBrowserUrl(search: string): AgentBrowserUrl {
  const params = new URLSearchParams(search);
  const [attribute = "", ...rest] = (params.get("attr") ?? "").split(":");
  const whole = (raw: string | null, min: number) => {
    const n = Number(raw);
    return raw !== null && Number.isInteger(n) && n >= min ? n : null;
  };
  const worker = whole(params.get("worker"), 0);
  const after = whole(params.get("after"), -1);
  const page = whole(params.get("page"), 1) ?? 1;
  return {
    worker: worker === null ? "" : String(worker),
    attribute: rest.length > 0 ? attribute : "",
    value: rest.length > 0 ? rest.join(":") : "",
    page: after === null ? 1 : page,
    after: page > 1 ? after : null,
    from: whole(params.get("from"), 1),
  };
}

export function agentBrowserParams(state: AgentBrowserUrl): Record<string, string | null> {
  return {
    worker: state.worker || null,
    attr: state.attribute && state.value ? `${state.attribute}:${state.value}` : null,
    page: state.from === null && state.page > 1 ? String(state.page) : null,
    after: state.from === null && state.page > 1 && state.after !== null ? String(state.after) : null,
    from: state.from === null ? null : String(state.from),
  };
}

function filtersOf(populationId: number, url: Pick<AgentBrowserUrl, "worker" | "attribute" | "value">): AgentFilters {
  const filters: AgentFilters = { population_id: populationId };
  if (url.worker) filters.worker_id = Number(url.worker);
  if (url.attribute && url.value) filters.attribute = `${url.attribute}:${url.value}`;
  return filters;
}

/**
 * One keyset page of agents at a time (never the whole population in the browser):
 * "Next" follows `next_after`, "Previous" goes back through the cursors seen so far.
 * The next page is fetched ahead while the reader looks at this one, so "Next" shows at once.
 */
export function AgentBrowser({ client, populationId, workerIds, categories, reloadKey, deploying = false, onUnauthorized }: AgentBrowserProps) {
  const id = useId();
  const [initial] = useState(() => readAgentBrowserUrl(window.location.search));
  const [draft, setDraft] = useState({ worker: initial.worker, attribute: initial.attribute, value: initial.value });
  const [filters, setFilters] = useState<AgentFilters>(() => filtersOf(populationId, initial));
  const firstId = populationId * 2 ** 32;
  // cursors[i] is the `after` of page i; the last one is the page on screen. A page restored
  // from the URL knows only its own cursor: `skipped` counts the pages before it.
  const [cursors, setCursors] = useState<Array<number | null>>(() =>
    initial.from !== null ? [firstId + initial.from - 2] : initial.page > 1 ? [null, initial.after] : [null],
  );
  const [skipped, setSkipped] = useState(initial.from === null && initial.page > 2 ? initial.page - 2 : 0);
  const [page, setPage] = useState<Page | null>(null);
  const prefetched = useRef(new Map<string, { page: Page; at: number }>());
  const [error, setError] = useState<string | null>(null);
  // Bumped by Retry after a failed load: the same page is asked for again.
  const [retries, setRetries] = useState(0);
  // Set by "Go to agent number": pages are then numbered by the agents' place in the population.
  const [jumpedTo, setJumpedTo] = useState<number | null>(initial.from);
  const [jumpDraft, setJumpDraft] = useState(initial.from === null ? "" : String(initial.from));
  const after = cursors[cursors.length - 1] ?? null;
  // Agent ids are population_id · 2^32 + index (arithmetic: JS bit operators are 32-bit).
  const pageNumber = cursors.length + (cursors.length > 1 ? skipped : 0);

  // The URL follows what is shown, so a reload or a shared link opens the same page.
  useEffect(() => {
    setSearchParams(
      agentBrowserParams({
        worker: filters.worker_id === undefined ? "" : String(filters.worker_id),
        attribute: filters.attribute?.split(":")[0] ?? "",
        value: filters.attribute?.split(":").slice(1).join(":") ?? "",
        page: pageNumber,
        after,
        from: jumpedTo,
      }),
    );
  }, [filters, pageNumber, after, jumpedTo]);

  // A layout effect starts the request right after the click's commit, not after the next
  // paint as a passive effect would: one frame less on every page flip.
  useLayoutEffect(() => {
    const ahead = prefetched.current.get(pageKey(filters, after, reloadKey));
    if (ahead && performance.now() - ahead.at < PREFETCH_TTL_MS) {
      setPage(ahead.page);
      setError(null);
      return;
    }
    const controller = new AbortController();
    client.agentsPage(filters, { after, limit: PAGE_SIZE, signal: controller.signal }).then(
      (result) => {
        if (controller.signal.aborted) return;
        setPage({ items: result.items, next: result.next_after });
        setError(null);
      },
      (err: unknown) => {
        if (controller.signal.aborted) return;
        if (isUnauthorized(err)) onUnauthorized(err);
        else setError(`Could not load agents: ${errorMessage(err)}`);
      },
    );
    return () => controller.abort();
  }, [client, filters, after, reloadKey, retries, onUnauthorized]);

  // Fetch the next page ahead (one request, whatever the reader does next).
  const next = page?.next ?? null;
  useEffect(() => {
    if (next === null) return;
    const cache = prefetched.current;
    const key = pageKey(filters, next, reloadKey);
    if (cache.has(key)) return;
    const controller = new AbortController();
    client.agentsPage(filters, { after: next, limit: PAGE_SIZE, signal: controller.signal }).then(
      (result) => {
        cache.set(key, { page: { items: result.items, next: result.next_after }, at: performance.now() });
        while (cache.size > PREFETCH_KEEP) cache.delete(cache.keys().next().value as string);
      },
      () => undefined, // a failed prefetch costs nothing: the page is fetched when asked for
    );
    return () => controller.abort();
  }, [client, filters, next, reloadKey]);

  function apply(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const next: AgentFilters = { population_id: populationId };
    if (draft.worker) next.worker_id = Number(draft.worker);
    if (draft.attribute && draft.value) next.attribute = `${draft.attribute}:${draft.value}`;
    setFilters(next);
    setCursors([null]);
    setSkipped(0);
    setJumpedTo(null);
  }

  function jump(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const number = Math.floor(Number(jumpDraft));
    if (!Number.isFinite(number) || number < 1) return;
    // A keyset page starts after the agent before it: deep pages cost the same as the first.
    setCursors([firstId + number - 2]);
    setSkipped(0);
    setJumpedTo(number);
  }

  const attributeNames = Object.keys(categories);
  const values = draft.attribute ? (categories[draft.attribute] ?? []) : [];
  const first = (pageNumber - 1) * PAGE_SIZE + 1;
  const items = page?.items ?? [];
  const shownText =
    items.length === 0
      ? ""
      : jumpedTo !== null
        ? `Agents ${agentNumber(Number(items[0]?.id), populationId).toLocaleString("en-US")}–${agentNumber(Number(items[items.length - 1]?.id), populationId).toLocaleString("en-US")}`
        : `Agents ${first.toLocaleString("en-US")}–${(first + items.length - 1).toLocaleString("en-US")}`;

  return (
    <section aria-labelledby={`${id}-heading`}>
      <div className="section-title">
        <h2 id={`${id}-heading`}>Agents</h2>
      </div>
      <form className="filters" onSubmit={apply} aria-label="Agent filters">
        <div>
          <label htmlFor={`${id}-worker`}>Worker</label>
          <select id={`${id}-worker`} value={draft.worker} onChange={(e) => setDraft({ ...draft, worker: e.target.value })}>
            <option value="">Any worker</option>
            {workerIds.map((w) => (
              <option key={w} value={String(w)}>
                Worker {w}
              </option>
            ))}
          </select>
        </div>
        <div>
          <label htmlFor={`${id}-attribute`}>Attribute</label>
          <select
            id={`${id}-attribute`}
            value={draft.attribute}
            onChange={(e) => setDraft({ ...draft, attribute: e.target.value, value: "" })}
          >
            <option value="">Any attribute</option>
            {attributeNames.map((name) => (
              <option key={name} value={name}>
                {name}
              </option>
            ))}
          </select>
        </div>
        <div>
          <label htmlFor={`${id}-value`}>Value</label>
          <select
            id={`${id}-value`}
            value={draft.value}
            disabled={!draft.attribute}
            onChange={(e) => setDraft({ ...draft, value: e.target.value })}
          >
            <option value="">Any value</option>
            {values.map((v) => (
              <option key={v} value={v}>
                {v}
              </option>
            ))}
          </select>
        </div>
        <button type="submit" className="button plain">
          Apply filters
        </button>
      </form>
      <form className="filters" onSubmit={jump} aria-label="Go to agent">
        <div>
          <label htmlFor={`${id}-jump`}>Go to agent number</label>
          <input
            id={`${id}-jump`}
            type="number"
            min={1}
            inputMode="numeric"
            value={jumpDraft}
            onChange={(e) => setJumpDraft(e.target.value)}
            placeholder="e.g. 500000"
          />
        </div>
        <button type="submit" className="button plain">
          Go
        </button>
      </form>

      <ErrorAlert message={error} onRetry={() => setRetries((n) => n + 1)} />
      <div className="table-wrap">
        <table className="data" aria-label="Agents">
          <thead>
            <tr>
              <th scope="col">ID</th>
              <th scope="col">Worker</th>
              <th scope="col">Attributes</th>
              <th scope="col">Persona</th>
            </tr>
          </thead>
          <tbody aria-busy={!page && error === null}>
            {!page && error === null && !deploying && <SkeletonRows columns={4} rows={5} />}
            {page?.items.map((agent) => (
              <tr key={agent.id}>
                <td className="num">
                  <Link href={`/agents/${agent.id}`} aria-label={`Agent ${agent.id}`}>
                    {agent.id}
                  </Link>
                </td>
                <td className="num">
                  {agent.worker_id ?? "–"}
                  {agent.orphaned && <span className="badge badge-offline">orphaned</span>}
                </td>
                <td className="attributes">
                  {Object.entries(agent.attributes)
                    .map(([k, v]) => `${k}: ${v}`)
                    .join(" · ")}
                </td>
                <td className="persona-cell" title={agent.persona}>
                  {agent.persona}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {deploying && (!page || page.items.length === 0) ? (
        <p className="empty" role="status">
          The agents show here once the deploy has stored them.
        </p>
      ) : (
        page && page.items.length === 0 && <p className="empty">No agents match.</p>
      )}
      {!page && error === null && !deploying && (
        <p className="visually-hidden" role="status">
          Loading agents…
        </p>
      )}
      <nav className="pager" aria-label="Agent pages">
        <button type="button" className="button plain" disabled={cursors.length <= 1} onClick={() => {
            if (cursors.length === 2) setSkipped(0); // back on page 1
            setCursors(cursors.slice(0, -1));
          }}>
          Previous page
        </button>
        <span className="muted" role="status" aria-label="Agents shown">
          {shownText}
        </span>
        <button
          type="button"
          className="button plain"
          disabled={!page || page.next === null}
          onClick={() => page && page.next !== null && setCursors([...cursors, page.next])}
        >
          Next page
        </button>
      </nav>
    </section>
  );
}
