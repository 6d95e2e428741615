import { type MouseEvent, useEffect, useMemo, useState } from "react";
import { type ApiClient, type ApiError, errorMessage, isUnauthorized } from "../api/client";
import { fetchPlugin } from "../api/plugins";
import { answer } from "../api/typedApi";
import type { components } from "../api/schema";
import type { Population } from "../api/types";
import { useFetched } from "../hooks/useFetched";
import { usePopulationSimulations } from "../hooks/usePopulationSimulations";
import { navigate } from "../router";
import {
  EGO_DRAWN,
  NO_VALUE_COLOUR,
  type ValueScale,
  circlePositions,
  moreText,
  rampColour,
  valueColour,
  valueLabel,
  valueScale,
} from "../state/networks";
import { ErrorAlert } from "./ErrorAlert";
import { Link } from "./Link";

type Neighbour = components["schemas"]["NeighbourOut"];

// The drawing reads one page of the API's largest size: its count is exact up to it.
const COUNTED = 1000;
// Rows the list shows at a time ("Load more" fetches the next page).
const LIST_PAGE = 50;

interface AgentNeighboursProps {
  client: ApiClient;
  agentId: number;
  population: Population;
  onUnauthorized: (err: ApiError) => void;
}

/** One page of the agent's neighbours in its population's graph, by id. */
function neighboursPage(client: ApiClient, agentId: number, after: number | null, limit: number, signal: AbortSignal) {
  const params = { path: { agent_id: agentId }, query: { limit, after } };
  return answer(client.api.GET("/api/agents/{agent_id}/neighbors", { params, signal }));
}

function attributesText(attributes: Record<string, unknown>): string {
  return Object.entries(attributes)
    .map(([k, v]) => `${k}: ${String(v)}`)
    .join(" · ");
}

/**
 * An agent's neighbours in its population's graph: its ego network drawn in SVG (the agent at
 * the centre, up to EGO_DRAWN neighbours on a circle, coloured by their value in the latest
 * round of the population's latest simulation) and the paged list of them. A population
 * without a graph gets a short line.
 */
export function AgentNeighbours({ client, agentId, population, onUnauthorized }: AgentNeighboursProps) {
  const hasGraph = population.graph !== null;
  if (!hasGraph) {
    return (
      <section aria-labelledby="neighbours-heading" data-testid="agent-neighbours">
        <h2 id="neighbours-heading">Neighbours</h2>
        <p className="empty">Its population has no graph: agents have no neighbours.</p>
      </section>
    );
  }
  return <NeighboursOnGraph client={client} agentId={agentId} population={population} onUnauthorized={onUnauthorized} />;
}

function NeighboursOnGraph({ client, agentId, population, onUnauthorized }: AgentNeighboursProps) {
  // The values are the newest simulation's (the API's own choice): its plugin names them.
  const { simulations } = usePopulationSimulations(client, population.id, onUnauthorized);
  const latest = simulations?.[0] ?? null;
  const pluginName = latest?.plugin ?? null;
  const { data: plugin } = useFetched(
    pluginName === null ? null : (signal) => fetchPlugin(client, pluginName, signal),
    [client, pluginName],
    { failure: "Could not load the plugin", onUnauthorized },
  );
  const { data: counted, error: countError } = useFetched(
    (signal) => neighboursPage(client, agentId, null, COUNTED, signal),
    [client, agentId],
    { failure: "Could not load the neighbours", onUnauthorized },
  );
  const drawn = useMemo(() => counted?.items.slice(0, EGO_DRAWN) ?? [], [counted]);
  const scale = useMemo(
    () => valueScale(pluginName === null ? null : (plugin?.action ?? null), (counted?.items ?? []).map((n) => n.value)),
    [plugin, pluginName, counted],
  );
  const more = counted ? moreText(counted.items.length, drawn.length, counted.next_after !== null) : null;
  const total = counted ? `${counted.items.length.toLocaleString("en-US")}${counted.next_after !== null ? "+" : ""}` : null;

  return (
    <section aria-labelledby="neighbours-heading" data-testid="agent-neighbours">
      <h2 id="neighbours-heading">Neighbours{total !== null && <span className="muted heading-count"> ({total})</span>}</h2>
      <ErrorAlert message={countError} />
      {!counted && countError === null && <p className="empty">Loading the neighbours…</p>}
      {counted && counted.items.length === 0 && <p className="empty">This agent has no neighbours (it is isolated in the graph).</p>}
      {counted && counted.items.length > 0 && (
        <div className="ego-layout">
          <EgoNetwork agentId={agentId} neighbours={drawn} scale={scale} more={more} />
          <div className="ego-side">
            <p className="muted small">
              {latest ? (
                <>
                  Coloured by each neighbour&apos;s value in the latest round of{" "}
                  <Link href={`/simulations/${latest.id}`}>{latest.name || `simulation ${latest.id}`}</Link>
                  {pluginName && <> ({pluginName})</>}.
                </>
              ) : (
                "No simulation has played on this population yet: the neighbours have no values."
              )}
            </p>
            <ValueLegend scale={scale} neighbours={drawn} />
            {more && (
              <p className="muted" data-testid="ego-more">
                {more}
              </p>
            )}
          </div>
        </div>
      )}
      {counted && counted.items.length > 0 && <NeighbourList client={client} agentId={agentId} scale={scale} onUnauthorized={onUnauthorized} />}
    </section>
  );
}

const SIZE = 360;
const CENTRE = SIZE / 2;
const RADIUS = 140;

function EgoNetwork({ agentId, neighbours, scale, more }: { agentId: number; neighbours: readonly Neighbour[]; scale: ValueScale; more: string | null }) {
  const points = circlePositions(neighbours.length, CENTRE, CENTRE, RADIUS);
  // Dots shrink so that 50 of them still leave gaps on the circle.
  const r = Math.max(4, Math.min(11, ((Math.PI * RADIUS) / Math.max(1, neighbours.length)) * 0.6));
  const valued = neighbours.filter((n) => n.value !== null).length;
  const label = `Agent ${agentId} and ${neighbours.length} of its neighbours on a circle${valued > 0 ? `, ${valued} with a value` : ""}${more ? `; ${more}` : ""}`;
  function open(event: MouseEvent<Element>, id: number) {
    if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    navigate(`/agents/${id}`);
  }
  return (
    // A group, not an image: its dots are links (to each neighbour's page). They are left out of
    // the tab order: the list below holds the same links, one tab stop each.
    <svg className="ego-network" viewBox={`0 0 ${SIZE} ${SIZE}`} role="group" aria-label={label} data-testid="ego-network" data-drawn={neighbours.length}>
      <g className="ego-edges" aria-hidden="true">
        {points.map((p, i) => (
          <line key={neighbours[i]!.id} x1={CENTRE} y1={CENTRE} x2={p.x} y2={p.y} />
        ))}
      </g>
      {neighbours.map((n, i) => {
        const fill = valueColour(scale, n.value);
        const p = points[i]!;
        const name = `Agent ${n.id} (number ${n.number}): ${n.value === null ? "no value" : valueLabel(scale, n.value)}`;
        return (
          <a key={n.id} href={`/agents/${n.id}`} onClick={(e) => open(e, n.id)} className="ego-link" tabIndex={-1} aria-label={name}>
            <title>{name}</title>
            <circle className={fill === NO_VALUE_COLOUR ? "ego-neighbour ego-no-value" : "ego-neighbour"} cx={p.x} cy={p.y} r={r} style={fill === NO_VALUE_COLOUR ? undefined : { fill }} data-value={n.value ?? ""} />
          </a>
        );
      })}
      <circle className="ego-centre" cx={CENTRE} cy={CENTRE} r={14}>
        <title>{`Agent ${agentId}`}</title>
      </circle>
    </svg>
  );
}

function ValueLegend({ scale, neighbours }: { scale: ValueScale; neighbours: readonly Neighbour[] }) {
  const missing = neighbours.filter((n) => n.value === null).length;
  if (scale.kind === "ramp") {
    const stops = [0, 0.25, 0.5, 0.75, 1].map((t) => `${rampColour(t)} ${t * 100}%`).join(", ");
    return (
      <div className="ego-legend" aria-label="Legend" role="group" data-testid="ego-legend">
        <span className="ego-ramp" style={{ background: `linear-gradient(to right, ${stops})` }} aria-hidden="true" />
        <span className="ego-ramp-labels">
          <span>{valueLabel(scale, scale.low)}</span>
          <span>{valueLabel(scale, scale.high)}</span>
        </span>
        {missing > 0 && <NoValueKey count={missing} />}
      </div>
    );
  }
  const counts = new Map<number, number>();
  for (const n of neighbours) if (n.value !== null) counts.set(n.value, (counts.get(n.value) ?? 0) + 1);
  return (
    <ul className="ego-legend" aria-label="Legend" data-testid="ego-legend">
      {scale.entries.map((entry) => (
        <li key={entry.value}>
          <span className="swatch" style={{ background: entry.colour }} aria-hidden="true" />
          {entry.label} <span className="muted">({(counts.get(entry.value) ?? 0).toLocaleString("en-US")} drawn)</span>
        </li>
      ))}
      {missing > 0 && (
        <li>
          <NoValueKey count={missing} />
        </li>
      )}
    </ul>
  );
}

function NoValueKey({ count }: { count: number }) {
  return (
    <>
      <span className="swatch swatch-none" aria-hidden="true" />
      no value <span className="muted">({count.toLocaleString("en-US")} drawn)</span>
    </>
  );
}

function NeighbourList({ client, agentId, scale, onUnauthorized }: { client: ApiClient; agentId: number; scale: ValueScale; onUnauthorized: (err: ApiError) => void }) {
  const [items, setItems] = useState<Neighbour[]>([]);
  const [next, setNext] = useState<number | null>(null);
  const [loading, setLoading] = useState(true);
  const [error, setError] = useState<string | null>(null);
  // The page to fetch: null the first, then the previous page's next_after.
  const [after, setAfter] = useState<number | null>(null);
  const [retries, setRetries] = useState(0);

  useEffect(() => {
    const controller = new AbortController();
    setLoading(true);
    neighboursPage(client, agentId, after, LIST_PAGE, controller.signal).then(
      (page) => {
        if (controller.signal.aborted) return;
        setItems((current) => (after === null ? page.items : [...current, ...page.items]));
        setNext(page.next_after);
        setError(null);
        setLoading(false);
      },
      (err: unknown) => {
        if (controller.signal.aborted) return;
        setLoading(false);
        if (isUnauthorized(err)) onUnauthorized(err);
        else setError(`Could not load the neighbours: ${errorMessage(err)}`);
      },
    );
    return () => controller.abort();
  }, [client, agentId, after, retries, onUnauthorized]);

  return (
    <>
      <ErrorAlert message={error} onRetry={() => setRetries((n) => n + 1)} />
      <div className="table-wrap">
        <table className="data" aria-label="Neighbour list">
          <thead>
            <tr>
              <th scope="col">ID</th>
              <th scope="col">Number</th>
              <th scope="col">Attributes</th>
              <th scope="col">Value</th>
            </tr>
          </thead>
          <tbody>
            {items.map((n) => {
              const colour = valueColour(scale, n.value);
              return (
                <tr key={n.id}>
                  <td className="num">
                    <Link href={`/agents/${n.id}`} aria-label={`Agent ${n.id}`}>
                      {n.id}
                    </Link>
                  </td>
                  <td className="num">{n.number.toLocaleString("en-US")}</td>
                  <td className="attributes">{attributesText(n.attributes)}</td>
                  <td data-value={n.value ?? ""}>
                    {colour !== NO_VALUE_COLOUR && <span className="swatch" style={{ background: colour }} aria-hidden="true" />}
                    {valueLabel(scale, n.value)}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>
      <nav className="pager" aria-label="Neighbour pages">
        <span className="muted" role="status" aria-label="Neighbours listed">
          {loading && items.length === 0 ? "Loading…" : `${items.length.toLocaleString("en-US")} ${items.length === 1 ? "neighbour" : "neighbours"} listed${next === null ? "" : ", more to load"}`}
        </span>
        {next !== null && (
          <button type="button" className="button plain" disabled={loading} onClick={() => setAfter(next)}>
            {loading ? "Loading…" : "Load more"}
          </button>
        )}
      </nav>
    </>
  );
}
