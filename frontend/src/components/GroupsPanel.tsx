import { useEffect, useMemo, useState } from "react";
import type { ApiClient, ApiError } from "../api/client";
import { useFetched } from "../hooks/useFetched";
import { GROUPS_PAGE_SIZE, groupColumns, keepsNoGroups, pageRange } from "../state/groups";
import type { MetricDeclaration } from "../state/metrics";
import { CursorPager } from "./CursorPager";
import { ErrorAlert } from "./ErrorAlert";
import { GroupExport } from "./GroupExport";
import { GroupSeriesCharts } from "./GroupSeriesCharts";
import { GroupSummary } from "./GroupSummary";
import { GroupsTable } from "./GroupsTable";

interface GroupsPanelProps {
  client: ApiClient;
  simulationId: number;
  /** The rounds played, in order: the choices of the round selector. */
  roundNumbers: readonly number[];
  /** The latest round played (null before the first): a new one refreshes what follows it. */
  latestRound: number | null;
  /** The plugin's group metric declarations (titles, types, units), when the page knows them. */
  declared: readonly MetricDeclaration[] | null | undefined;
  onUnauthorized: (err: ApiError) => void;
}

/**
 * The run's group metrics: a round's groups a keyset page at a time, each metric summed up
 * over the page, a group's rounds as charts, and the export. Shown only once the API names
 * some metrics for the run, so a run whose plugin keeps none shows nothing (and, a round
 * later, stops asking).
 */
export function GroupsPanel({ client, simulationId, roundNumbers, latestRound, declared, onUnauthorized }: GroupsPanelProps) {
  // "" follows the latest round as rounds complete; a number stays on that round.
  const [chosenRound, setChosenRound] = useState("");
  // cursors[i] is the `after` of page i; the last one is the page on screen.
  const [cursors, setCursors] = useState<Array<string | null>>([null]);
  const [selected, setSelected] = useState<number | null>(null);
  const after = cursors[cursors.length - 1] ?? null;
  const round = chosenRound === "" ? null : Number(chosenRound);
  // A chosen round's groups never change; the latest's are asked again after each round.
  const refreshKey = round === null ? latestRound : null;

  // Set once a page says the run keeps none although a round had completed: nothing more is asked.
  const [settled, setSettled] = useState(false);
  const { data, error } = useFetched(
    settled
      ? null
      : (signal) =>
          client
            .groupsPage(simulationId, { round, after: after === null ? null : Number(after), limit: GROUPS_PAGE_SIZE, signal })
            .then((page) => ({ page, askedAfter: refreshKey })),
    [client, simulationId, round, after, refreshKey, settled],
    { failure: "Could not load the groups", onUnauthorized },
  );
  const page = data?.page ?? null;
  useEffect(() => {
    if (keepsNoGroups(page, data?.askedAfter ?? null)) setSettled(true);
  }, [page, data?.askedAfter]);

  const columns = useMemo(() => groupColumns(page?.names ?? [], declared), [page?.names, declared]);
  if (!page || page.names.length === 0) return null;

  function chooseRound(value: string) {
    setChosenRound(value);
    setCursors([null]);
  }

  const shownRound = page.round;
  return (
    <section aria-labelledby="groups-heading" data-testid="groups" data-round={shownRound ?? ""} data-groups={page.groups}>
      <div className="section-title">
        <h2 id="groups-heading">Groups</h2>
        <div className="inline-label">
          <label htmlFor="groups-round">Round</label>
          <select id="groups-round" value={chosenRound} onChange={(e) => chooseRound(e.target.value)}>
            <option value="">latest{round === null && shownRound !== null ? ` (round ${shownRound})` : ""}</option>
            {roundNumbers.map((r) => (
              <option key={r} value={String(r)}>
                {r}
              </option>
            ))}
          </select>
        </div>
      </div>
      <p className="muted" data-testid="group-count">
        <strong>{page.groups.toLocaleString("en-US")}</strong> {page.groups === 1 ? "group" : "groups"} in round {shownRound ?? "–"}; {pageRange(page.items)}. Choose a group for
        its values over the rounds.
      </p>
      <ErrorAlert message={error} />
      <GroupSummary items={page.items} columns={columns} />
      <GroupsTable items={page.items} columns={columns} selected={selected} onSelect={setSelected} labelledBy="groups-heading" />
      <CursorPager label="Group pages" cursors={cursors} next={page.next_after === null ? null : String(page.next_after)} onCursors={setCursors} />
      {selected !== null && (
        <GroupSeriesCharts
          key={selected}
          client={client}
          simulationId={simulationId}
          group={selected}
          columns={columns}
          latestRound={latestRound}
          onClose={() => setSelected(null)}
          onUnauthorized={onUnauthorized}
        />
      )}
      <GroupExport client={client} simulationId={simulationId} onUnauthorized={onUnauthorized} />
    </section>
  );
}
