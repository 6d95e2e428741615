import { memo, useCallback, useEffect, useMemo, useReducer, useRef, useState } from "react";
import { type ApiClient, type ApiError, errorMessage, isUnauthorized } from "../api/client";
import { fetchPlugin } from "../api/plugins";
import { allRounds } from "../api/rounds";
import { answer } from "../api/typedApi";
import type { ExportFormat, Simulation, SimulationDetail, SimulationRound } from "../api/types";
import { HistogramChart } from "../components/charts/HistogramChart";
import { OpinionHeatmap } from "../components/charts/OpinionHeatmap";
import { RoundsChart } from "../components/charts/RoundsChart";
import { ConfirmDialog } from "../components/ConfirmDialog";
import { ConnectionIndicator } from "../components/ConnectionIndicator";
import { ErrorAlert } from "../components/ErrorAlert";
import { GroupsPanel } from "../components/GroupsPanel";
import { Skeleton } from "../components/Skeleton";
import { Link } from "../components/Link";
import { LlmMeters } from "../components/LlmMeters";
import { MetricsPanel } from "../components/MetricsPanel";
import { PolicyParts } from "../components/PolicyParts";
import { PopulationName, usePopulations } from "../components/PopulationName";
import { useNow } from "../components/RelativeTime";
import { ProgressBar } from "../components/ProgressBar";
import { RunConfig } from "../components/RunConfig";
import { RunRecord } from "../components/RunRecord";
import { RunTimeline, useRunTimeline } from "../components/RunTimeline";
import { SegmentMeans } from "../components/SegmentMeans";
import { TableScroll } from "../components/TableScroll";
import { StateBadge } from "../components/StateBadge";
import { TranscriptBrowser } from "../components/TranscriptBrowser";
import { useEventStream } from "../hooks/useEventStream";
import { useFetched } from "../hooks/useFetched";
import { useCanWrite } from "../role";
import { navigate, setSearchParams, useSearchParam } from "../router";
import { formatPace, pace } from "../state/eta";
import { llmModeHint, llmModeLabel } from "../state/estimate";
import { formatDuration, formatTimestamp, roundSpan, runSpan } from "../state/meters";
import { roundTimes } from "../state/timeline";
import { isUnreachable } from "../state/panel";
import { formatFileSize, parseServerTime } from "../format";
import { pageHolding, parseAfter, roundsPage } from "../state/roundPages";
import { actionRange, anyNetworkBytes, storesChanges, totalNetworkBytes } from "../state/networks";
import {
  anyLost,
  anyShortfall,
  anyTargets,
  belowFloorText,
  participationText,
  anyPromptTokens,
  describeRule,
  equilibrium,
  formatNumber,
  callsPerAgent,
  initialSimulationView,
  isActive,
  isSimulationDeleted,
  lostText,
  pauseText,
  progressText,
  promptCache,
  promptCacheText,
  promptTokenTotals,
  guessParams,
  resolveRule,
  roundsPlayed,
  simulationActions,
  simulationReducer,
  sortedRounds,
} from "../state/simulations";

interface SimulationDetailPageProps {
  client: ApiClient;
  token: string;
  id: number;
  onUnauthorized: (err: ApiError) => void;
}

function describePolicy(simulation: SimulationDetail): string {
  const policy = simulation.config.policy as Record<string, unknown> & { kind: string };
  switch (policy.kind) {
    case "level_k": {
      const byAttribute = policy.depth_attribute ? `, depth by ${String(policy.depth_attribute)}` : "";
      return `level-k (default depth ${String(policy.default_depth)}, noise ${String(policy.noise_std)}${byAttribute})`;
    }
    case "synthetic":
      return `synthetic (latency ${String(policy.latency_s)} s)`;
    case "llm": {
      const prompt = simulation.config.prompt;
      return `LLM ${simulation.models.join(", ")}${prompt ? ` (system ${prompt.system}, ${prompt.user})` : ""}`;
    }
    default:
      return policy.kind;
  }
}

/** Saves a Blob under a file name through a temporary object URL. */
function saveBlob(blob: Blob, filename: string): void {
  const url = URL.createObjectURL(blob);
  const anchor = document.createElement("a");
  anchor.href = url;
  anchor.download = filename;
  anchor.style.display = "none";
  document.body.append(anchor);
  anchor.click();
  anchor.remove();
  // The download has its own reference by the time the click returns; free ours a bit later.
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** Memoized: progress events (up to 10 a second) re-render the page, not a table of every round. */
// No population to look up until the run is loaded (a stable empty list).
const NO_IDS: readonly number[] = [];

/** A page of the rounds table (a long run has up to 1,000 rounds: 50 rows at a time). */
const RoundsTable = memo(function RoundsTable({ rounds, chosen, targets }: { rounds: readonly SimulationRound[]; chosen: number | null; targets: boolean }) {
  // Only runs that allowed partial rounds can lose agents: the column shows when one did.
  const lost = anyLost(rounds);
  // Rounds in which some agents gave no valid answer: each round's participation and parse failures.
  const shortfall = anyShortfall(rounds);
  // LLM runs whose servers counted prompt tokens: the share of them taken from the prefix cache.
  const tokens = anyPromptTokens(rounds);
  const finished = rounds.some((r) => r.finished_at);
  // Network simulations over several worker processes: the values they sent each other.
  const network = anyNetworkBytes(rounds);
  // Runs that store only what changed (network simulations): the rows each round wrote.
  const changes = storesChanges(rounds);
  return (
    <TableScroll label="Rounds">
      <table className="data" aria-labelledby="rounds-heading">
        <thead>
          <tr>
            <th scope="col">Round</th>
            <th scope="col">Valid</th>
            <th scope="col">Invalid</th>
            <th scope="col">Late</th>
            {lost && <th scope="col">Lost</th>}
            {shortfall && (
              <th scope="col" title="Share of the agents whose answer counted (unreadable, late and lost answers count against it)">
                Participation
              </th>
            )}
            {shortfall && (
              <th scope="col" title="Share of the answers that arrived in time but could not be read as an action">
                Parse failures
              </th>
            )}
            <th scope="col">Mean</th>
            <th scope="col">Median</th>
            <th scope="col">Std</th>
            {/* The guessing game's (a run whose rounds have a target): other runs have none. */}
            {targets && <th scope="col">Target</th>}
            {targets && <th scope="col">Winning number</th>}
            {targets && <th scope="col">Winners</th>}
            {tokens && (
              <th scope="col" title="Prompt tokens the LLM servers took from their prefix cache (0 when a server does not report it)">
                Prompt tokens from cache
              </th>
            )}
            {network && (
              <th scope="col" title="Bytes of values the worker processes sent each other in the round (a network simulation)">
                Sent between workers
              </th>
            )}
            {changes && (
              <th scope="col" title="Decisions the round wrote: only those that changed since the round before (round 1: every agent's)">
                Rows stored
              </th>
            )}
            {finished && <th scope="col">Started</th>}
            {finished && <th scope="col">Finished</th>}
            <th scope="col">Duration</th>
          </tr>
        </thead>
        <tbody>
          {rounds.map((r) => (
            <tr key={r.round} aria-label={`Round ${r.round}`} data-round={r.round} className={r.round === chosen ? "chosen-round" : undefined}>
              <td className="num">{r.round}</td>
              <td className="num">{r.n_valid.toLocaleString("en-US")}</td>
              <td className="num">{r.n_invalid.toLocaleString("en-US")}</td>
              <td className="num">{r.n_late.toLocaleString("en-US")}</td>
              {lost && <td className="num">{(r.n_lost ?? 0).toLocaleString("en-US")}</td>}
              {shortfall && (
                <td className="num" data-participation={r.participation ?? ""}>
                  {participationText(r)}
                </td>
              )}
              {shortfall && (
                <td className="num" data-parse-failures={r.parse_failure_rate ?? ""}>
                  {participationText({ participation: r.parse_failure_rate })}
                </td>
              )}
              <td className="num" data-mean={r.mean ?? ""}>
                {formatNumber(r.mean)}
              </td>
              <td className="num">{formatNumber(r.median)}</td>
              <td className="num">{formatNumber(r.std)}</td>
              {targets && <td className="num">{formatNumber(r.target)}</td>}
              {targets && <td className="num">{formatNumber(r.winner_value)}</td>}
              {targets && <td className="num">{r.winner_count.toLocaleString("en-US")}</td>}
              {tokens && (
                <td className="num" data-cached={r.cached_prompt_tokens ?? 0}>
                  {promptCacheText(r.cached_prompt_tokens, r.prompt_tokens) ?? "–"}
                </td>
              )}
              {network && (
                <td className="num" data-network-bytes={r.network_bytes ?? 0}>
                  {formatFileSize(r.network_bytes ?? 0)}
                </td>
              )}
              {changes && (
                <td className="num" data-decisions-stored={r.decisions_stored ?? ""}>
                  {r.decisions_stored == null ? "–" : r.decisions_stored.toLocaleString("en-US")}
                </td>
              )}
              {finished && <td className="num">{formatTimestamp(roundSpan(r).started)}</td>}
              {finished && <td className="num">{formatTimestamp(r.finished_at)}</td>}
              <td className="num">{formatNumber(r.duration_s, 3)} s</td>
            </tr>
          ))}
        </tbody>
      </table>
    </TableScroll>
  );
});

/** The run's duration: final once it finished, else up to now, re-rendered each second. */
function RunDuration({ simulation }: { simulation: SimulationDetail }) {
  const now = useNow();
  return <>{formatDuration(runSpan(simulation, simulation.finished_at ? 0 : now).seconds)}</>;
}

export function SimulationDetailPage({ client, token, id, onUnauthorized }: SimulationDetailPageProps) {
  const [view, dispatch] = useReducer(simulationReducer, initialSimulationView);
  const [error, setError] = useState<string | null>(null);
  // The run's own load, apart from the actions' errors: shown with a Retry, and the badge says offline.
  const [loadError, setLoadError] = useState<{ text: string; unreachable: boolean } | null>(null);
  const [retrying, setRetrying] = useState(false);
  const [notFound, setNotFound] = useState(false);
  const [confirming, setConfirming] = useState(false);
  const [cancelling, setCancelling] = useState(false);
  const [confirmingDelete, setConfirmingDelete] = useState(false);
  const [deleting, setDeleting] = useState(false);
  const [acting, setActing] = useState<"pause" | "resume" | null>(null);
  // The chosen round (histogram, segments, meters) and the rounds table's page live in the URL.
  const shownRound = parseAfter(useSearchParam("round"));
  const roundsAfterParam = useSearchParam("rounds_after");
  const [cancelReason, setCancelReason] = useState("");
  const [rerunning, setRerunning] = useState(false);
  const [exportRound, setExportRound] = useState<string>("");
  const [exporting, setExporting] = useState<ExportFormat | null>(null);
  const [exported, setExported] = useState<{ ok: boolean; text: string } | null>(null);
  const canWrite = useCanWrite();
  const controller = useRef<AbortController | null>(null);
  // Batches of events received so far: orders REST answers against events (see SimulationAction).
  const received = useRef(0);
  const topics = useMemo(() => [`simulation:${id}`], [id]);
  const simulation = view.simulation;

  useEffect(() => () => controller.current?.abort(), []);
  useEffect(() => {
    document.title = `${simulation?.name ?? `Simulation ${id}`} · populace`;
  }, [simulation?.name, id]);

  const refetch = useCallback(async () => {
    controller.current?.abort();
    const mine = new AbortController();
    controller.current = mine;
    const since = received.current;
    try {
      const [detail, rounds] = await Promise.all([client.simulation(id, mine.signal), allRounds(client, id, mine.signal)]);
      if (mine.signal.aborted) return true;
      dispatch({ type: "snapshot", simulation: detail, rounds, since });
      setLoadError(null);
      return true;
    } catch (err) {
      if (mine.signal.aborted) return true;
      if (isUnauthorized(err)) onUnauthorized(err);
      else if ((err as ApiError).status === 404) setNotFound(true);
      else setLoadError({ text: `Could not load simulation ${id}: ${errorMessage(err)}`, unreachable: isUnreachable(err) });
      return false;
    }
  }, [client, id, onUnauthorized]);

  const timeline = useRunTimeline(client, id, onUnauthorized);
  const status = useEventStream(
    client,
    token,
    topics,
    {
      onEvents: (events) => {
        timeline.onEvents(events);
        received.current += 1;
        dispatch({ type: "events", events, at: received.current });
        // Deleted meanwhile (another tab, the CLI): nothing of it is left to show.
        if (events.some(isSimulationDeleted)) setNotFound(true);
      },
      onResync: () => {
        timeline.reload();
        return refetch();
      },
    },
    onUnauthorized,
  );

  const rounds = useMemo(() => sortedRounds(view.rounds), [view.rounds]);
  const storedRule = useMemo(() => guessParams(simulation?.config).rule, [simulation?.config]);
  const rule = useMemo(() => resolveRule(storedRule), [storedRule]);
  const eq = useMemo(() => equilibrium(rule), [rule]);
  // The guessing game's views (rule, target, winner, equilibrium) for a run that has them: its
  // config holds a rule (shown before round 1), or its rounds a target or a winning number.
  const hasRule = storedRule !== undefined;
  const hasTargets = useMemo(() => hasRule || anyTargets(rounds), [hasRule, rounds]);
  const latest: SimulationRound | undefined = rounds[rounds.length - 1];
  // Summed over the rounds, so it follows round.completed live (the run's stored total is the same sum).
  const tokenTotals = useMemo(() => promptTokenTotals(rounds), [rounds]);
  const runCache = promptCache(tokenTotals.cached, tokenTotals.prompt);
  const latestCache = promptCache(latest?.cached_prompt_tokens, latest?.prompt_tokens);
  const shown = (shownRound !== null ? view.rounds.get(shownRound) : undefined) ?? latest;
  // The table opens on the page of the chosen round, then follows its own pager.
  const roundsAfter = roundsAfterParam !== null ? parseAfter(roundsAfterParam) : shownRound !== null ? pageHolding(rounds, shownRound) : null;
  const tablePage = useMemo(() => roundsPage(rounds, roundsAfter), [rounds, roundsAfter]);
  const populationId = simulation?.population_id;
  // Rounds per minute and the time left, from when the latest rounds finished (the timeline).
  const startedAt = simulation?.started_at ? parseServerTime(simulation.started_at) : null;
  const runPace = useMemo(() => pace(roundTimes(timeline.state), simulation?.rounds ?? 0, startedAt), [timeline.state, simulation?.rounds, startedAt]);

  // Its name (and hosting) in the facts, and the transcript browser's segments: the
  // population's distributions and their categories.
  const populations = usePopulations(client, populationId === undefined ? NO_IDS : [populationId], onUnauthorized);
  const knownPopulation = populationId === undefined ? undefined : populations.get(populationId);
  const population = knownPopulation === "missing" ? undefined : knownPopulation;

  // A plugin run's values span its action's range (a choice: its options), which the
  // histogram and the heatmap are drawn over; the guessing game's come from its rule.
  const pluginName = (simulation?.config.plugin as { name?: string } | undefined)?.name ?? null;
  const otherPlugin = pluginName !== null && pluginName !== "guess" ? pluginName : null;
  const { data: plugin } = useFetched(
    otherPlugin === null ? null : (signal) => fetchPlugin(client, otherPlugin, signal),
    [client, otherPlugin],
    { failure: "Could not load the plugin", onUnauthorized },
  );
  const valueRange = useMemo(
    () => (otherPlugin !== null ? actionRange(plugin?.action) : { low: rule.min, high: rule.max, discrete: false }),
    [otherPlugin, plugin, rule],
  );
  const roundNumbers = useMemo(() => rounds.map((r) => r.round), [rounds]);
  const sentBetweenWorkers = useMemo(() => (anyNetworkBytes(rounds) ? totalNetworkBytes(rounds) : null), [rounds]);

  function chooseRound(value: string) {
    setSearchParams({ round: value || null, rounds_after: null });
  }

  async function cancel() {
    setCancelling(true);
    const since = received.current;
    const reason = cancelReason.trim();
    try {
      const params = { path: { simulation_id: id } };
      // A reason (when given) is kept with the run.
      const cancelled = (await answer(client.api.POST("/api/simulations/{simulation_id}/cancel", { params, body: reason ? { reason } : undefined }))) as Simulation;
      dispatch({ type: "updated", simulation: cancelled, since });
      setCancelReason("");
    } catch (err) {
      if (isUnauthorized(err)) onUnauthorized(err);
      setError(`Could not cancel simulation ${id}: ${errorMessage(err)}`);
    } finally {
      setCancelling(false);
      setConfirming(false);
    }
  }

  /** The same population, config and seed again, as a new run; 409 says why not (population busy or gone). */
  async function rerun() {
    setRerunning(true);
    setError(null);
    try {
      const created = await answer(client.api.POST("/api/simulations/{simulation_id}/rerun", { params: { path: { simulation_id: id } } }));
      navigate(`/simulations/${created.id}`);
    } catch (err) {
      if (isUnauthorized(err)) onUnauthorized(err);
      setError(`Could not re-run simulation ${id}: ${errorMessage(err)}`);
      setRerunning(false);
    }
  }

  async function remove() {
    setDeleting(true);
    try {
      await client.api.DELETE("/api/simulations/{simulation_id}", { params: { path: { simulation_id: id } } });
      navigate("/simulations");
    } catch (err) {
      if (isUnauthorized(err)) onUnauthorized(err);
      setError(`Could not delete simulation ${id}: ${errorMessage(err)}`);
      setDeleting(false);
      setConfirmingDelete(false);
    }
  }

  async function pause() {
    setActing("pause");
    setError(null);
    const since = received.current;
    try {
      dispatch({ type: "updated", simulation: await client.pauseSimulation(id), since });
    } catch (err) {
      if (isUnauthorized(err)) onUnauthorized(err);
      setError(`Could not pause simulation ${id}: ${errorMessage(err)}`);
    } finally {
      setActing(null);
    }
  }

  /** Nothing to give: the workers hold the LLM API keys (api_key_env names them). */
  async function resume() {
    setActing("resume");
    setError(null);
    const since = received.current;
    try {
      dispatch({ type: "updated", simulation: await client.resumeSimulation(id), since });
    } catch (err) {
      if (isUnauthorized(err)) onUnauthorized(err);
      setError(`Could not resume simulation ${id}: ${errorMessage(err)}`);
    } finally {
      setActing(null);
    }
  }

  async function download(format: ExportFormat) {
    setExporting(format);
    setExported(null);
    try {
      const { blob, filename } = await client.exportDecisions(id, format, exportRound ? Number(exportRound) : null);
      saveBlob(blob, filename);
      setExported({ ok: true, text: `Downloaded ${filename} (${formatFileSize(blob.size)})` });
    } catch (err) {
      if (isUnauthorized(err)) onUnauthorized(err);
      setExported({ ok: false, text: `Could not export the decisions: ${errorMessage(err)}` });
    } finally {
      setExporting(null);
    }
  }

  if (notFound) {
    return (
      <main className="page">
        <h1>Simulation {id} not found</h1>
        <p>
          See <Link href="/simulations">all simulations</Link>.
        </p>
      </main>
    );
  }

  const active = simulation !== null && isActive(simulation.status);
  // A viewer gets none of the actions (its token is read-only).
  const actions =
    simulation && canWrite ? simulationActions(simulation.status) : { pause: false, resume: false, cancel: false, delete: false };
  const progress = view.progress;

  return (
    <main className="page">
      <p className="breadcrumb">
        <Link href="/simulations">Simulations</Link> /{" "}
        {simulation && (
          <>
            <PopulationName
              id={simulation.population_id}
              population={knownPopulation}
              href={`/simulations?population_id=${simulation.population_id}`}
              compact
            />{" "}
            /
          </>
        )}
      </p>
      <div className="page-title">
        <h1>{simulation?.name ?? `Simulation ${id}`}</h1>
        {simulation && <StateBadge state={simulation.status} />}
        <ConnectionIndicator status={status} unreachable={loadError?.unreachable ?? false} />
        <div className="push-right form-actions inline-actions">
          {actions.pause && (
            <button type="button" className="button plain" disabled={acting !== null} onClick={() => void pause()}>
              {acting === "pause" ? "Pausing…" : "Pause"}
            </button>
          )}
          {actions.resume && (
            <button type="button" className="button primary" disabled={acting !== null} onClick={() => void resume()}>
              {acting === "resume" ? "Resuming…" : "Resume"}
            </button>
          )}
          {/* Its actions once the run is known: never a disabled Cancel before the run is loaded. */}
          {canWrite && simulation && !actions.delete && (
            <button type="button" className="button danger" disabled={!actions.cancel || cancelling} onClick={() => setConfirming(true)}>
              Cancel simulation
            </button>
          )}
          {canWrite && simulation && (
            <Link className="button plain" href={`/simulations/new?clone=${id}`}>
              Clone into launch form
            </Link>
          )}
          {canWrite && actions.delete && (
            <button type="button" className="button plain" disabled={rerunning} onClick={() => void rerun()}>
              {rerunning ? "Re-running…" : "Re-run"}
            </button>
          )}
          {actions.delete && (
            <button type="button" className="button danger" disabled={deleting} onClick={() => setConfirmingDelete(true)}>
              Delete simulation
            </button>
          )}
        </div>
      </div>

      <ErrorAlert
        message={loadError?.text ?? null}
        retrying={retrying}
        onRetry={() => {
          setRetrying(true);
          void refetch().finally(() => setRetrying(false));
        }}
      />
      <ErrorAlert message={error} />
      {!simulation && loadError === null && <Skeleton label={`Loading simulation ${id}…`} lines={4} />}
      {simulation?.status === "failed" && (
        <p className="alert" role="alert">
          The simulation failed: {simulation.error}
          {simulation.current_round < simulation.rounds && (
            <> Resume goes on from round {simulation.current_round + 1}; the rounds already played are kept.</>
          )}
        </p>
      )}
      {simulation?.status === "paused" && (
        <div className="warning" role="status" aria-label="Pause reason" data-testid="pause-reason">
          <strong>{pauseText(simulation)}</strong>
          <br />
          Nothing of the round in flight was kept; Resume plays round {simulation.current_round + 1} again.
        </div>
      )}
      {simulation && (simulation.rounds_below_floor ?? 0) > 0 && (
        <p className="warning" role="status" aria-label="Below the participation floor" data-testid="below-floor">
          Not a whole run: {belowFloorText(simulation)}. Each round&apos;s participation and parse failures are in the rounds table.
        </p>
      )}
      {simulation && simulation.lost_agents > 0 && (
        <p className="warning" role="status" aria-label="Lost agents" data-testid="lost-agents">
          Partial rounds: {lostText(simulation.lost_agents)}.
        </p>
      )}

      {simulation && (
        <dl className="facts">
          <dt>Population</dt>
          <dd>
            <PopulationName id={simulation.population_id} population={knownPopulation} />
          </dd>
          {hasRule && (
            <>
              <dt>Rule</dt>
              <dd>{describeRule(rule)}</dd>
            </>
          )}
          <dt>Policy</dt>
          <dd>{describePolicy(simulation)}</dd>
          <dt>Seed</dt>
          <dd className="mono">{simulation.seed}</dd>
          {simulation.config.allow_partial && (
            <>
              <dt>Partial rounds</dt>
              <dd>allowed: agents no live worker hosts count as lost</dd>
            </>
          )}
          {simulation.stop_reason && (
            <>
              <dt>Stopped</dt>
              <dd>{simulation.stop_reason}</dd>
            </>
          )}
          {simulation.cancel_reason && (
            <>
              <dt>Cancelled because</dt>
              <dd data-testid="cancel-reason">{simulation.cancel_reason}</dd>
            </>
          )}
          {simulation.record?.rerun_of !== null && simulation.record?.rerun_of !== undefined && (
            <>
              <dt>Re-run of</dt>
              <dd>
                <Link href={`/simulations/${simulation.record.rerun_of}`}>Simulation {simulation.record.rerun_of}</Link>
              </dd>
            </>
          )}
          <dt>Started</dt>
          <dd data-testid="run-started">{simulation.started_at ? formatTimestamp(simulation.started_at) : "not yet"}</dd>
          <dt>Finished</dt>
          <dd data-testid="run-finished">{simulation.finished_at ? formatTimestamp(simulation.finished_at) : "not yet"}</dd>
          <dt>Duration</dt>
          <dd data-testid="run-duration">
            {/* Still playing: up to now, ticking each second. */}
            <RunDuration simulation={simulation} />
            {!simulation.finished_at && simulation.started_at && <span className="muted"> so far</span>}
          </dd>
        </dl>
      )}

      {active && (
        <ProgressBar
          label="Round progress"
          fraction={progress && progress.total > 0 ? progress.answered / progress.total : null}
          text={progress ? progressText(progress) : simulation.status === "pending" ? "Starting…" : `Waiting for round ${simulation.current_round + 1}…`}
        />
      )}

      {simulation && (
        <dl className="stats">
          <div className="stat" data-testid="current-round">
            <dt>Rounds played</dt>
            <dd>
              {roundsPlayed(simulation, view.rounds)} <span className="muted">of {simulation.rounds}</span>
            </dd>
          </div>
          <div className="stat" data-testid="latest-mean">
            <dt>Mean</dt>
            <dd>{formatNumber(latest?.mean)}</dd>
          </div>
          {hasTargets && (
            <div className="stat" data-testid="latest-target">
              <dt>Target</dt>
              <dd>{formatNumber(latest?.target)}</dd>
            </div>
          )}
          {hasTargets && (
            <div className="stat" data-testid="latest-winner">
              <dt>Winning number</dt>
              <dd>{formatNumber(latest?.winner_value)}</dd>
            </div>
          )}
          {hasRule && (
            <div className="stat" data-testid="equilibrium">
              <dt>Equilibrium</dt>
              <dd>{formatNumber(eq)}</dd>
            </div>
          )}
          {simulation.llm_mode && (
            <div className="stat" data-testid="llm-mode" title={llmModeHint(simulation.llm_mode)}>
              <dt>LLM calls</dt>
              <dd>
                {llmModeLabel(simulation.llm_mode)}
                {latest && <span className="muted"> ({callsPerAgent(latest)} per agent, round {latest.round})</span>}
              </dd>
            </div>
          )}
          {runCache !== null && (
            <div className="stat" data-testid="prompt-cache-run" title="Prompt tokens the LLM servers took from their prefix cache, over all rounds (0 when a server does not report it)">
              <dt>Prompt tokens from cache</dt>
              <dd>
                {runCache.percent} <span className="muted">({runCache.counts})</span>
              </dd>
            </div>
          )}
          {latestCache !== null && (
            <div className="stat" data-testid="prompt-cache-latest" title="Prompt tokens the LLM servers took from their prefix cache, in the latest round">
              <dt>From cache, round {latest?.round}</dt>
              <dd>
                {latestCache.percent} <span className="muted">({latestCache.counts})</span>
              </dd>
            </div>
          )}
          {simulation.status === "running" && (
            <div className="stat" data-testid="run-pace" title="From when the latest rounds finished">
              <dt>Pace</dt>
              <dd>
                {formatPace(runPace.roundsPerMinute)}
                {runPace.etaSeconds !== null && <span className="muted"> (about {formatDuration(runPace.etaSeconds)} left)</span>}
              </dd>
            </div>
          )}
          {sentBetweenWorkers !== null && (
            <div className="stat" data-testid="network-bytes" title="Bytes of values the worker processes sent each other, over the kept rounds">
              <dt>Sent between workers</dt>
              <dd>{formatFileSize(sentBetweenWorkers)}</dd>
            </div>
          )}
          {simulation.lost_agents > 0 && (
            <div className="stat" data-testid="lost-agents-stat">
              <dt>Lost answers</dt>
              <dd>{simulation.lost_agents.toLocaleString("en-US")}</dd>
            </div>
          )}
        </dl>
      )}

      <div className={hasTargets || !simulation ? "columns" : undefined}>
        {(hasTargets || !simulation) && (
          <section aria-labelledby="over-rounds-heading">
            <h2 id="over-rounds-heading">Mean, target and winner over rounds</h2>
            {simulation ? <RoundsChart rounds={rounds} equilibrium={eq} /> : loadError === null && <Skeleton label="Loading the rounds…" chart />}
          </section>
        )}
        <section aria-labelledby="histogram-heading">
          <div className="section-title">
            <h2 id="histogram-heading">
              {hasTargets || !simulation ? "Guesses" : "Values"} in round {shown?.round ?? "–"}
            </h2>
            <label className="inline-label">
              Show round
              <select value={shownRound === null || !view.rounds.has(shownRound) ? "" : String(shownRound)} onChange={(e) => chooseRound(e.target.value)}>
                <option value="">latest</option>
                {rounds.map((r) => (
                  <option key={r.round} value={String(r.round)}>
                    {r.round}
                  </option>
                ))}
              </select>
            </label>
          </div>
          {shown ? (
            <HistogramChart
              counts={shown.histogram}
              min={valueRange?.low ?? rule.min}
              max={valueRange?.high ?? rule.max}
              noun={hasTargets ? "guess" : "value"}
              label={`Histogram of round ${shown.round}: ${shown.n_valid.toLocaleString("en-US")} valid ${hasTargets ? "guesses" : "values"} in ${shown.histogram.length} bins over [${valueRange?.low ?? rule.min}, ${valueRange?.high ?? rule.max}]`}
            />
          ) : simulation ? (
            <p className="empty">No round has completed yet.</p>
          ) : (
            loadError === null && <Skeleton label="Loading the histogram…" chart />
          )}
        </section>
      </div>

      {shown && <SegmentMeans round={shown} />}

      {/* A mixed population: who plays which policy, and the shown round by policy. */}
      {simulation && <PolicyParts parts={simulation.record?.policies} round={shown} />}

      {/* The run's declared metrics, charted from their declarations (absent from older managers). */}
      {simulation && <MetricsPanel declared={simulation.metrics} rounds={rounds} shown={shown} />}

      {/* Figures per group (a plugin's group metrics): shown once the API names some for the run. */}
      {simulation && (
        <GroupsPanel
          client={client}
          simulationId={id}
          roundNumbers={roundNumbers}
          latestRound={latest?.round ?? null}
          declared={plugin?.group_metrics}
          onUnauthorized={onUnauthorized}
        />
      )}

      {/* Where the values were, round by round (opinion dynamics, voters, compartments). */}
      {simulation && rounds.length > 0 && <OpinionHeatmap rounds={rounds} range={valueRange} defaultOpen={Boolean(population?.graph)} />}

      {simulation && <LlmMeters simulation={simulation} rounds={rounds} round={shown} progress={progress} />}

      <section aria-labelledby="rounds-heading">
        <div className="section-title">
          <h2 id="rounds-heading">Rounds</h2>
        </div>
        <RoundsTable rounds={tablePage.items} chosen={shown?.round ?? null} targets={hasTargets} />
        {simulation && rounds.length === 0 && <p className="empty">No round has completed yet.</p>}
        {(tablePage.previous !== undefined || tablePage.next !== null) && (
          <nav className="pager" aria-label="Round pages">
            <button
              type="button"
              className="button plain"
              disabled={tablePage.previous === undefined}
              onClick={() => setSearchParams({ rounds_after: tablePage.previous === undefined ? null : String(tablePage.previous ?? 0) })}
            >
              Earlier rounds
            </button>
            <span className="muted">
              rounds {tablePage.first}–{tablePage.first + tablePage.items.length - 1} of {tablePage.total}
            </span>
            <button
              type="button"
              className="button plain"
              disabled={tablePage.next === null}
              onClick={() => setSearchParams({ rounds_after: tablePage.next === null ? null : String(tablePage.next) })}
            >
              Later rounds
            </button>
          </nav>
        )}
      </section>

      {simulation && <RunTimeline feed={timeline} />}

      <section aria-labelledby="export-heading">
        <h2 id="export-heading">Export decisions</h2>
        <div className="filters">
          <div>
            <label htmlFor="export-round">Rounds to export</label>
            <select id="export-round" value={exportRound} onChange={(e) => setExportRound(e.target.value)}>
              <option value="">all rounds</option>
              {rounds.map((r) => (
                <option key={r.round} value={String(r.round)}>
                  round {r.round}
                </option>
              ))}
            </select>
          </div>
          <button type="button" className="button plain" disabled={exporting !== null || rounds.length === 0} onClick={() => void download("csv")}>
            Export CSV
          </button>
          <button type="button" className="button plain" disabled={exporting !== null || rounds.length === 0} onClick={() => void download("jsonl")}>
            Export JSONL
          </button>
          <button type="button" className="button plain" disabled={exporting !== null || rounds.length === 0} onClick={() => void download("parquet")}>
            Export Parquet
          </button>
        </div>
        <p className={exported?.ok === false ? "alert" : "muted"} role="status" aria-label="Export result">
          {exporting ? `Exporting ${exporting.toUpperCase()}…` : (exported?.text ?? "")}
        </p>
      </section>

      {simulation && (
        <TranscriptBrowser
          client={client}
          simulationId={id}
          roundNumbers={roundNumbers}
          counts={population?.counts ?? null}
          onUnauthorized={onUnauthorized}
        />
      )}

      {simulation && <RunConfig simulation={simulation} />}
      {simulation && <RunRecord client={client} simulation={simulation} onUnauthorized={onUnauthorized} />}

      <ConfirmDialog
        open={confirming}
        title={`Cancel simulation ${id}?`}
        confirmLabel="Cancel simulation"
        cancelLabel={simulation?.status === "paused" ? "Keep it paused" : "Keep running"}
        danger
        busy={cancelling}
        onConfirm={() => void cancel()}
        onCancel={() => setConfirming(false)}
      >
        <p>
          {simulation?.status === "paused"
            ? "The run ends here and can no longer be resumed. The rounds already played are kept."
            : "The round in flight stops on every worker. The rounds already played are kept."}
        </p>
        <label htmlFor="cancel-reason">Reason (optional, shown with the run)</label>
        <textarea id="cancel-reason" className="cancel-reason" rows={2} maxLength={500} value={cancelReason} onChange={(e) => setCancelReason(e.target.value)} />
      </ConfirmDialog>
      <ConfirmDialog
        open={confirmingDelete}
        title={`Delete simulation ${id}?`}
        confirmLabel="Delete simulation"
        cancelLabel="Keep it"
        danger
        busy={deleting}
        onConfirm={() => void remove()}
        onCancel={() => setConfirmingDelete(false)}
      >
        <p>
          Its {simulation?.current_round ?? 0} kept rounds and every decision are deleted from the store; export them first
          if you need them. This cannot be undone.
        </p>
      </ConfirmDialog>
    </main>
  );
}
