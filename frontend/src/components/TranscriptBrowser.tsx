import { type ReactNode, useEffect, useMemo, useState } from "react";
import type { ApiClient, ApiError } from "../api/client";
import { answer } from "../api/typedApi";
import { TRANSCRIPT_STATUSES, type Transcript, type TranscriptPage } from "../api/types";
import { useFetched } from "../hooks/useFetched";
import { setSearchParams, useSearch } from "../router";
import { formatNumber } from "../state/simulations";
import {
  cursorOf,
  filterProblems,
  filtersFromSearch,
  filtersToParams,
  promptText,
  segmentOptions,
  type TranscriptFilters,
  transcriptQuery,
} from "../state/transcripts";
import { CursorPager } from "./CursorPager";
import { ErrorAlert } from "./ErrorAlert";
import { Link } from "./Link";
import { Clip, TableScroll } from "./TableScroll";

const PAGE_SIZE = 25;

/** A transcript's prompt, raw answer and reason, shown when its row is expanded. */
export function TranscriptDetail({ transcript }: { transcript: Transcript }) {
  return (
    <div className="transcript-detail" data-testid="transcript-detail">
      {transcript.reason && (
        <p>
          <strong>Reason:</strong> <span data-testid="transcript-reason">{transcript.reason}</span>
        </p>
      )}
      <h4>Prompt sent</h4>
      <pre className="transcript-text" tabIndex={0} aria-label="Prompt sent" data-testid="transcript-prompt">
        {promptText(transcript.prompt) || "–"}
      </pre>
      <h4>Raw answer</h4>
      {transcript.response === null ? (
        <p className="muted">Not stored: the run did not keep raw answers (store_responses was off).</p>
      ) : (
        <pre className="transcript-text" tabIndex={0} aria-label="Raw answer" data-testid="transcript-response">
          {transcript.response}
        </pre>
      )}
    </div>
  );
}

/** A transcript as a table row (round, status, value, reason), with its prompt and answer in a
 * row below when expanded. `before` and `after` are the table's own cells around those. */
export function TranscriptRow({
  transcript: t,
  label,
  columns,
  expanded,
  onToggle,
  before,
  after,
}: {
  transcript: Transcript;
  label: string;
  columns: number;
  expanded: boolean;
  onToggle: () => void;
  before?: ReactNode;
  after?: ReactNode;
}) {
  return (
    <>
      <tr aria-label={label} data-status={t.status}>
        {before}
        <td className="num">{t.round}</td>
        <td>
          <span className={`badge transcript-${t.status}`}>{t.status}</span>
        </td>
        <td className="num">{formatNumber(t.value)}</td>
        <td className="transcript-reason">{t.reason ?? ""}</td>
        {after}
        <td>
          <button type="button" className="button plain small" aria-expanded={expanded} onClick={onToggle}>
            {expanded ? "Hide" : "Show"} prompt and answer
          </button>
        </td>
      </tr>
      {expanded && (
        <tr className="transcript-expanded">
          <td colSpan={columns}>
            <TranscriptDetail transcript={t} />
          </td>
        </tr>
      )}
    </>
  );
}

export function statusText(t: Pick<Transcript, "status" | "value">): string {
  return t.status === "valid" ? formatNumber(t.value) : t.status;
}

interface TranscriptBrowserProps {
  client: ApiClient;
  simulationId: number;
  /** Round numbers played, for the round filter (the endpoint shows one round: the latest by default). */
  roundNumbers: readonly number[];
  /** The population's agents per category per distribution: the segments to filter by. */
  counts: Record<string, Record<string, number>> | null;
  onUnauthorized: (err: ApiError) => void;
}

/**
 * A sample of one round's answers, filtered by status, segment and value range (the
 * filters live in the URL), a keyset page at a time; a row opens to its exact prompt, raw
 * answer and the reason it was invalid or late.
 */
export function TranscriptBrowser({ client, simulationId, roundNumbers, counts, onUnauthorized }: TranscriptBrowserProps) {
  const search = useSearch();
  const applied = useMemo(() => filtersFromSearch(search), [search]);
  const [draft, setDraft] = useState<TranscriptFilters>(applied);
  // cursors[i] is the `after` of page i (the last one is on screen), for the filters in `key`:
  // other filters start again at the first page.
  const [paging, setPaging] = useState<{ key: string; cursors: Array<string | null> }>({ key: "", cursors: [null] });
  const [open, setOpen] = useState<ReadonlySet<string>>(new Set());
  const problems = filterProblems(draft);
  const segments = useMemo(() => segmentOptions(counts), [counts]);
  const appliedKey = JSON.stringify(transcriptQuery(applied, null, PAGE_SIZE));
  // "latest" follows the run: a newly completed round is fetched (a chosen round never changes).
  const latestRound = roundNumbers[roundNumbers.length - 1] ?? null;
  const follows = applied.round === "" ? latestRound : null;
  const anyRound = latestRound !== null;
  const cursors = paging.key === appliedKey ? paging.cursors : [null];
  const setCursors = (next: Array<string | null>) => setPaging({ key: appliedKey, cursors: next });
  const after = cursors[cursors.length - 1] ?? null;

  // Filters applied (here, or from the URL on back/forward) show in the form.
  useEffect(() => {
    setDraft(applied);
    setOpen(new Set());
    // appliedKey stands for `applied`, a new object per URL read.
  }, [appliedKey]);

  // Nothing to load while the filters are wrong, or before any round is kept.
  const loadable = Object.keys(filterProblems(applied)).length === 0 && anyRound;
  const { data: page, error } = useFetched(
    loadable
      ? (signal) =>
          answer(client.api.GET("/api/simulations/{simulation_id}/transcripts", { params: { path: { simulation_id: simulationId }, query: transcriptQuery(applied, after, PAGE_SIZE) }, signal }))
            .then((result) => result as TranscriptPage)
            .then((result) => ({ items: result.items, next: cursorOf(result.next_after) }))
      : null,
    // appliedKey stands for `applied`, a new object per URL read.
    [client, simulationId, appliedKey, after, follows, anyRound],
    { failure: "Could not load the transcripts", onUnauthorized, clearOnReload: true },
  );

  function apply(next: TranscriptFilters) {
    if (Object.keys(filterProblems(next)).length > 0) return;
    setSearchParams(filtersToParams(next));
  }

  function toggle(key: string) {
    setOpen((current) => {
      const next = new Set(current);
      if (next.has(key)) next.delete(key);
      else next.add(key);
      return next;
    });
  }

  const field = (name: keyof TranscriptFilters) => ({
    "aria-invalid": problems[name] ? true : undefined,
    "aria-describedby": problems[name] ? `transcripts-${name}-problem` : undefined,
  });

  return (
    <section aria-labelledby="transcripts-heading" data-testid="transcript-browser">
      <h2 id="transcripts-heading">Transcripts</h2>
      <form
        className="filters"
        aria-label="Transcript filters"
        onSubmit={(event) => {
          event.preventDefault();
          apply(draft);
        }}
      >
        <div>
          <label htmlFor="transcripts-round">Round</label>
          <select id="transcripts-round" value={draft.round} onChange={(e) => apply({ ...draft, round: e.target.value })}>
            <option value="">latest{roundNumbers.length > 0 ? ` (${roundNumbers[roundNumbers.length - 1]})` : ""}</option>
            {roundNumbers.map((n) => (
              <option key={n} value={String(n)}>
                {n}
              </option>
            ))}
          </select>
        </div>
        <div>
          <label htmlFor="transcripts-status">Status</label>
          <select id="transcripts-status" value={draft.status} onChange={(e) => apply({ ...draft, status: e.target.value as TranscriptFilters["status"] })}>
            <option value="">any status</option>
            {TRANSCRIPT_STATUSES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </div>
        <div>
          <label htmlFor="transcripts-segment">Segment</label>
          <select id="transcripts-segment" value={draft.attribute} onChange={(e) => apply({ ...draft, attribute: e.target.value })} {...field("attribute")}>
            <option value="">every agent</option>
            {draft.attribute && !segments.some((s) => s.value === draft.attribute) && <option value={draft.attribute}>{draft.attribute}</option>}
            {segments.map((s) => (
              <option key={s.value} value={s.value}>
                {s.label}
              </option>
            ))}
          </select>
        </div>
        <div>
          <label htmlFor="transcripts-min">Value from</label>
          <input id="transcripts-min" inputMode="decimal" size={6} value={draft.min} onChange={(e) => setDraft({ ...draft, min: e.target.value })} {...field("min")} />
          {problems.min && (
            <span id="transcripts-min-problem" className="field-error">
              {problems.min}
            </span>
          )}
        </div>
        <div>
          <label htmlFor="transcripts-max">to</label>
          <input id="transcripts-max" inputMode="decimal" size={6} value={draft.max} onChange={(e) => setDraft({ ...draft, max: e.target.value })} {...field("max")} />
          {problems.max && (
            <span id="transcripts-max-problem" className="field-error">
              {problems.max}
            </span>
          )}
        </div>
        <button type="submit" className="button plain" disabled={Object.keys(problems).length > 0}>
          Apply
        </button>
      </form>

      <ErrorAlert message={error} />
      {latestRound === null && <p className="empty">No round has completed yet.</p>}
      {latestRound !== null && !page && error === null && <p className="empty">Loading transcripts…</p>}
      {page && page.items.length === 0 && <p className="empty">No answers match these filters.</p>}
      {page && page.items.length > 0 && (
        <TableScroll label="Transcripts" pinFirst>
          <table className="data" aria-label="Transcripts">
            <thead>
              <tr>
                <th scope="col">Agent</th>
                <th scope="col">Round</th>
                <th scope="col">Status</th>
                <th scope="col">Value</th>
                <th scope="col">Reason</th>
                <th scope="col">Attributes</th>
                <th scope="col">
                  <span className="visually-hidden">Details</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {page.items.map((t) => {
                const key = `${t.round}:${t.agent_id}`;
                return (
                  <TranscriptRow
                    key={key}
                    transcript={t}
                    label={`Agent ${t.agent_id} round ${t.round}`}
                    columns={7}
                    expanded={open.has(key)}
                    onToggle={() => toggle(key)}
                    before={
                      <td>
                        <Link href={`/agents/${t.agent_id}`}>{t.agent_id}</Link>
                      </td>
                    }
                    after={
                      <td className="muted">
                        <Clip
                          text={Object.entries(t.attributes ?? {})
                            .map(([name, value]) => `${name}: ${String(value)}`)
                            .join(", ")}
                        />
                      </td>
                    }
                  />
                );
              })}
            </tbody>
          </table>
        </TableScroll>
      )}
      <CursorPager label="Transcript pages" cursors={cursors} next={page?.next} onCursors={setCursors} />
    </section>
  );
}
