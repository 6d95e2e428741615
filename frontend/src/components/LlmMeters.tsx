import { memo } from "react";
import type { EndpointMeter, RoundProgress, SimulationDetail, SimulationRound } from "../api/types";
import { anyCost, formatCost, formatCount, formatDuration, formatLatency, formatRate, formatTimestamp, meterKey, roundSpan, runMeters, sumMeters, totalOf } from "../state/meters";
import { isActive } from "../state/simulations";

/** One table of per-endpoint meters; `label` names it for screen readers and tests. */
const MetersTable = memo(function MetersTable({ meters, label, summed }: { meters: readonly EndpointMeter[]; label: string; summed: boolean }) {
  const cost = anyCost(meters);
  const total = totalOf(meters);
  const latencyHint = summed ? "The highest of the rounds' percentiles: an upper bound for the run" : undefined;
  const row = (m: EndpointMeter, name: string, key: string) => (
    <tr key={key} aria-label={name} data-requests={m.requests} data-tokens={m.prompt_tokens + m.completion_tokens}>
      <th scope="row" className="meter-endpoint">
        {name === "All endpoints" ? (
          name
        ) : (
          <>
            <span className="mono">{m.model}</span> <span className="muted">{m.base_url}</span>
          </>
        )}
      </th>
      <td className="num">{formatCount(m.requests)}</td>
      <td className="num" title={m.last_error || undefined}>
        {formatCount(m.errors)}
      </td>
      <td className="num">{formatCount(m.late)}</td>
      <td className="num">{formatCount(m.skipped)}</td>
      <td className="num">{formatCount(m.prompt_tokens)}</td>
      <td className="num">{formatCount(m.completion_tokens)}</td>
      <td className="num">{formatLatency(m.latency_p50_s)}</td>
      <td className="num">{formatLatency(m.latency_p95_s)}</td>
      <td className="num">{formatRate(m.requests_per_s)}</td>
      {cost && <td className="num">{formatCost(m.cost_usd)}</td>}
    </tr>
  );
  return (
    <div className="table-wrap">
      <table className="data" aria-label={label}>
        <thead>
          <tr>
            <th scope="col">Endpoint</th>
            <th scope="col">Requests</th>
            <th scope="col">Errors</th>
            <th scope="col" title="Answers that came after the agent's deadline">
              Late
            </th>
            <th scope="col" title="Requests not sent while the endpoint's circuit breaker was open">
              Skipped
            </th>
            <th scope="col">Prompt tokens</th>
            <th scope="col">Completion tokens</th>
            <th scope="col" title={latencyHint}>
              Latency p50
            </th>
            <th scope="col" title={latencyHint}>
              Latency p95
            </th>
            <th scope="col">Requests/s</th>
            {cost && (
              <th scope="col" title="Estimated from the endpoint's price per token">
                Est. cost
              </th>
            )}
          </tr>
        </thead>
        <tbody>{meters.map((m) => row(m, `${m.model} at ${m.base_url}`, meterKey(m)))}</tbody>
        {total && <tfoot>{row(total, "All endpoints", "total")}</tfoot>}
      </table>
    </div>
  );
});

function RoundTiming({ round }: { round: SimulationRound }) {
  const span = roundSpan(round);
  return (
    <p className="muted" data-testid="round-timing">
      Round {round.round}
      {span.started && <> started {formatTimestamp(span.started)},</>}
      {span.finished && <> finished {formatTimestamp(span.finished)},</>} took {formatDuration(span.seconds)}.
    </p>
  );
}

interface LlmMetersProps {
  simulation: SimulationDetail;
  rounds: readonly SimulationRound[];
  /** The round chosen on the page (its meters show), if any has completed. */
  round: SimulationRound | undefined;
  /** The round in flight, with its partial meters when the manager sends them. */
  progress: RoundProgress | null;
}

/**
 * The LLM meters per endpoint: the round in flight (live), the chosen round, and the run.
 * A run without an LLM has no meters; only its rounds' timing shows.
 */
export function LlmMeters({ simulation, rounds, round, progress }: LlmMetersProps) {
  // The stored sums come with the page's snapshot; while the run plays, its rounds (which
  // arrive live) are summed here instead.
  const playing = isActive(simulation.status);
  const run = playing ? sumMeters(rounds.map((r) => r.endpoints)) : runMeters(simulation.meters, rounds);
  const summed = playing || !simulation.meters?.length;
  const live = progress?.endpoints ?? [];
  const hasLlm = simulation.config.policy.kind === "llm" || run.length > 0;
  return (
    <section aria-labelledby="meters-heading" data-testid="llm-meters">
      <div className="section-title">
        <h2 id="meters-heading">{hasLlm ? "LLM meters" : "Timing"}</h2>
        {simulation.cost_usd !== null && simulation.cost_usd !== undefined && (
          <span className="muted" data-testid="run-cost">
            est. cost of the run {formatCost(simulation.cost_usd)}
          </span>
        )}
      </div>
      {round ? <RoundTiming round={round} /> : <p className="muted">No round has completed yet.</p>}
      {hasLlm && live.length > 0 && progress && (
        <>
          <h3>Round {progress.round}, in flight</h3>
          <MetersTable meters={live} label={`LLM meters, round ${progress.round} in flight`} summed={false} />
        </>
      )}
      {hasLlm && round && (
        <>
          <h3>Round {round.round}</h3>
          {(round.endpoints ?? []).length > 0 ? (
            <MetersTable meters={round.endpoints ?? []} label={`LLM meters, round ${round.round}`} summed={false} />
          ) : (
            <p className="empty">
              No per-endpoint meters for this round ({formatCount(round.llm_requests)} requests, {formatCount(round.prompt_tokens)} prompt and{" "}
              {formatCount(round.completion_tokens)} completion tokens).
            </p>
          )}
        </>
      )}
      {hasLlm && (
        <>
          <h3>Whole run</h3>
          {run.length > 0 ? (
            <MetersTable meters={run} label="LLM meters, whole run" summed={summed} />
          ) : (
            <p className="empty">
              No per-endpoint meters yet ({formatCount(simulation.prompt_tokens)} prompt and {formatCount(simulation.completion_tokens)} completion tokens so far).
            </p>
          )}
        </>
      )}
    </section>
  );
}
