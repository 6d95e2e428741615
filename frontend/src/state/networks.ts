// Populations with a graph and the runs played on them (issue 28, item 6): the population's
// degree distribution and numbers, an agent's ego network coloured by its neighbours' values,
// and a run's opinion heatmap from the rounds' histograms. Pure functions only: the components
// draw what these return.
import type { Plugin, PopulationDetail, SimulationRound } from "../api/types";

export type GraphStats = NonNullable<PopulationDetail["graph"]>;

// --- the degree distribution ---------------------------------------------------------------

export interface DegreeBin {
  /** Smallest and largest degree in the bin. */
  low: number;
  high: number;
  /** "0", "1", "2–3", "4–7", … */
  label: string;
  count: number;
  /** Of all agents, 0..1. */
  share: number;
}

/**
 * The degree histogram's bins as worker_server/graphs/stats.py `degree_histogram` makes them:
 * bin 0 holds degree 0, bin b ≥ 1 degrees 2^(b-1) .. 2^b − 1 (log2 bins).
 */
export function degreeBins(histogram: readonly number[] | null | undefined): DegreeBin[] {
  if (!histogram) return [];
  const total = histogram.reduce((sum, c) => sum + c, 0);
  return histogram.map((count, b) => {
    const low = b === 0 ? 0 : 2 ** (b - 1);
    const high = b === 0 ? 0 : 2 ** b - 1;
    return { low, high, label: low === high ? String(low) : `${low}–${high}`, count, share: total > 0 ? count / total : 0 };
  });
}

/** The bars' text alternative: "Degree 2–3: 120 agents (24.0 %); …". */
export function degreeSummary(bins: readonly DegreeBin[]): string {
  if (bins.length === 0) return "No degree distribution";
  return bins.map((b) => `degree ${b.label}: ${b.count.toLocaleString("en-US")} agents (${(b.share * 100).toFixed(1)} %)`).join("; ");
}

const KIND_NAMES: Record<string, string> = {
  complete: "complete",
  erdos_renyi: "Erdős–Rényi",
  watts_strogatz: "Watts–Strogatz",
  barabasi_albert: "Barabási–Albert",
  cliques: "disjoint cliques",
  edge_list: "uploaded edge list",
};

export function graphKindName(kind: string): string {
  return KIND_NAMES[kind] ?? kind;
}

function whole(n: number): string {
  return n.toLocaleString("en-US");
}

function percent(share: number, digits = 1): string {
  return `${(share * 100).toFixed(digits)} %`;
}

/** The graph's numbers as a definition list reads them: [term, detail, hint?]. */
export function graphFacts(graph: GraphStats): Array<{ term: string; detail: string; hint?: string }> {
  const facts: Array<{ term: string; detail: string; hint?: string }> = [
    { term: "Kind", detail: graphKindName(graph.kind) },
    { term: "Edges", detail: whole(graph.edges) },
    { term: "Mean degree", detail: graph.mean_degree.toLocaleString("en-US", { maximumFractionDigits: 2 }) },
    { term: "Degree range", detail: graph.min_degree === graph.max_degree ? whole(graph.min_degree) : `${whole(graph.min_degree)}–${whole(graph.max_degree)}` },
    { term: "Isolated agents", detail: whole(graph.isolated) },
  ];
  if (graph.components === null || graph.largest_component === null) {
    facts.push({ term: "Components", detail: "not counted", hint: "Components are not counted past 5·10^7 edges" });
  } else {
    facts.push({ term: "Components", detail: whole(graph.components) });
    const share = graph.nodes > 0 ? graph.largest_component / graph.nodes : 0;
    facts.push({ term: "Largest component", detail: `${whole(graph.largest_component)} agents (${percent(share)})` });
  }
  facts.push(
    graph.clustering
      ? {
          term: "Clustering",
          detail: `${formatSmall(graph.clustering.clustering)} ± ${formatSmall(graph.clustering.stderr)}`,
          hint: "Estimated from sampled wedges (a standard error after ±)",
        }
      : { term: "Clustering", detail: "–", hint: "No agent has two neighbours" },
  );
  facts.push({ term: "Edges across workers", detail: percent(graph.cut_fraction), hint: "The share of edges whose ends the deploy placed on different workers (the cut fraction)" });
  return facts;
}

/** 0.0123 → "0.0123", 0.5 → "0.5": enough digits for small coefficients. */
function formatSmall(value: number): string {
  if (value === 0) return "0";
  return value.toLocaleString("en-US", { maximumSignificantDigits: 3, maximumFractionDigits: 6 });
}

// --- values and their colours --------------------------------------------------------------

/** An action as GET /api/plugins describes it: kind, and low/high or options. */
export type ActionDescription = Plugin["action"];

// Distinct on light and dark backgrounds; the first three read as S, I, R (blue, red, grey).
export const CATEGORY_COLOURS: readonly string[] = ["#3355d1", "#d1453b", "#8a8f99", "#2e9e5b", "#c98a14", "#8e44ad", "#16a3b8", "#b5487a"];
/** A value not known (no simulation, or no valid answer). */
export const NO_VALUE_COLOUR = "transparent";
// Most categories a legend lists one by one; more, and values are shaded on a ramp.
const MAX_CATEGORIES = CATEGORY_COLOURS.length;

export type ValueScale =
  | { kind: "categories"; entries: Array<{ value: number; label: string; colour: string }> }
  | { kind: "ramp"; low: number; high: number };

function numberOr(value: unknown, fallback: number): number {
  return typeof value === "number" && Number.isFinite(value) ? value : fallback;
}

/**
 * How values are coloured: the options of a choice (by index), the values of a small integer
 * range or a boolean as categories; a number range (or anything else) on a ramp. Without the
 * action (an unknown plugin), from the values seen: a few whole numbers are categories.
 */
export function valueScale(action: ActionDescription | null | undefined, values: ReadonlyArray<number | null>): ValueScale {
  const kind = action?.kind;
  if (kind === "choice" && Array.isArray(action?.options)) {
    const options = action.options as unknown[];
    return { kind: "categories", entries: options.map((o, i) => ({ value: i, label: String(o), colour: CATEGORY_COLOURS[i % MAX_CATEGORIES]! })) };
  }
  if (kind === "boolean") {
    return {
      kind: "categories",
      entries: [
        { value: 0, label: "false", colour: CATEGORY_COLOURS[0]! },
        { value: 1, label: "true", colour: CATEGORY_COLOURS[1]! },
      ],
    };
  }
  if (kind === "integer") {
    const low = numberOr(action?.low, 0);
    const high = numberOr(action?.high, low);
    if (high - low + 1 <= MAX_CATEGORIES) return integerCategories(low, high);
    return { kind: "ramp", low, high };
  }
  if (kind === "number") return { kind: "ramp", low: numberOr(action?.low, 0), high: numberOr(action?.high, 1) };
  const known = values.filter((v): v is number => v !== null && Number.isFinite(v));
  if (known.length === 0) return { kind: "categories", entries: [] };
  const distinct = [...new Set(known)].sort((a, b) => a - b);
  if (distinct.every(Number.isInteger) && distinct.length <= MAX_CATEGORIES) {
    return { kind: "categories", entries: distinct.map((v, i) => ({ value: v, label: String(v), colour: CATEGORY_COLOURS[i]! })) };
  }
  return { kind: "ramp", low: distinct[0]!, high: distinct[distinct.length - 1]! };
}

function integerCategories(low: number, high: number): ValueScale {
  const entries = [];
  for (let v = low; v <= high; v += 1) entries.push({ value: v, label: String(v), colour: CATEGORY_COLOURS[(v - low) % MAX_CATEGORIES]! });
  return { kind: "categories", entries };
}

/** A value's colour on a scale; NO_VALUE_COLOUR for none or one the scale does not know. */
export function valueColour(scale: ValueScale, value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return NO_VALUE_COLOUR;
  if (scale.kind === "categories") return scale.entries.find((e) => e.value === value)?.colour ?? NO_VALUE_COLOUR;
  const span = scale.high - scale.low;
  return rampColour(span > 0 ? (value - scale.low) / span : 0.5);
}

/** A value as the legend and the list say it: an option's name, else the number. */
export function valueLabel(scale: ValueScale, value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return "–";
  if (scale.kind === "categories") return scale.entries.find((e) => e.value === value)?.label ?? String(value);
  return value.toLocaleString("en-US", { maximumFractionDigits: 4 });
}

// Viridis at five stops: ordered in lightness, readable for colour-blind readers, and visible
// on the light and the dark page alike.
const RAMP: ReadonlyArray<readonly [number, number, number]> = [
  [68, 1, 84],
  [59, 82, 139],
  [33, 145, 140],
  [94, 201, 98],
  [253, 231, 37],
];

/** t in [0, 1] (clamped) on the ramp, as "rgb(r, g, b)". */
export function rampColour(t: number): string {
  const x = Math.min(1, Math.max(0, Number.isFinite(t) ? t : 0)) * (RAMP.length - 1);
  const i = Math.min(RAMP.length - 2, Math.floor(x));
  const f = x - i;
  const [a, b] = [RAMP[i]!, RAMP[i + 1]!];
  const mix = (k: 0 | 1 | 2) => Math.round(a[k] + (b[k] - a[k]) * f);
  return `rgb(${mix(0)}, ${mix(1)}, ${mix(2)})`;
}

// --- the ego network -----------------------------------------------------------------------

/** Most neighbours drawn around an agent; the rest are counted ("N more"). */
export const EGO_DRAWN = 50;

/** `count` points evenly on a circle around (cx, cy), the first at the top, clockwise. */
export function circlePositions(count: number, cx: number, cy: number, radius: number): Array<{ x: number; y: number }> {
  return Array.from({ length: count }, (_, i) => {
    const angle = -Math.PI / 2 + (2 * Math.PI * i) / Math.max(1, count);
    return { x: cx + radius * Math.cos(angle), y: cy + radius * Math.sin(angle) };
  });
}

/** "12 more neighbours not drawn"; with more pages unread, at least that many ("950+"). */
export function moreText(total: number, drawn: number, morePages: boolean): string | null {
  const rest = total - drawn;
  if (rest <= 0 && !morePages) return null;
  const count = `${rest.toLocaleString("en-US")}${morePages ? "+" : ""}`;
  return `${count} more ${rest === 1 && !morePages ? "neighbour" : "neighbours"} not drawn`;
}

// --- runs: the opinion heatmap, compartments, bytes between workers ------------------------

/** The value range a run's histogram covers: its plugin's action range (a choice: 0..n−1). */
export function actionRange(action: ActionDescription | null | undefined): { low: number; high: number; discrete: boolean; labels?: string[] } | null {
  if (!action) return null;
  if (action.kind === "choice" && Array.isArray(action.options)) {
    const options = (action.options as unknown[]).map(String);
    return { low: 0, high: Math.max(0, options.length - 1), discrete: true, labels: options };
  }
  if (action.kind === "boolean") return { low: 0, high: 1, discrete: true, labels: ["false", "true"] };
  const low = numberOr(action.low, NaN);
  const high = numberOr(action.high, NaN);
  if (!Number.isFinite(low) || !Number.isFinite(high)) return null;
  return { low, high, discrete: action.kind === "integer" };
}

export interface HeatmapRow {
  label: string;
  /** The histogram bins the row sums (a discrete value's bin, or a run of bins). */
  bins: number[];
}

export interface Heatmap {
  /** Round numbers, left to right. */
  rounds: number[];
  /** Value rows, lowest first (drawn bottom up). */
  rows: HeatmapRow[];
  /** shares[row][column]: of the round's valid values, the share in the row (0..1). */
  shares: number[][];
  /** The largest share in the grid (the colour scale's top). */
  maxShare: number;
}

// A continuous range is shown in at most this many rows (101 bins → 101 rows is fine; 10,000 is not).
const MAX_ROWS = 101;

function formatEdge(v: number): string {
  return v.toLocaleString("en-US", { maximumFractionDigits: 3 });
}

/**
 * The rows of a heatmap over `bins` equal bins of [low, high] (np.histogram's: bin i holds
 * values with floor((v − low) / (high − low) · bins) = i, the top value in the last bin). A
 * discrete range with at most one value per bin gets a row per value (sir: S, I, R), the bin
 * its value falls in; a continuous one a row per bin (merged to at most MAX_ROWS).
 */
export function heatmapRows(bins: number, range: ReturnType<typeof actionRange>): HeatmapRow[] {
  if (bins <= 0) return [];
  if (!range) return Array.from({ length: bins }, (_, i) => ({ label: `bin ${i + 1}`, bins: [i] }));
  const { low, high } = range;
  const span = high - low;
  const values = span >= 0 && range.discrete ? Math.round(span) + 1 : Infinity;
  if (values <= bins) {
    return Array.from({ length: values }, (_, k) => {
      const bin = span > 0 ? Math.min(bins - 1, Math.floor((k / span) * bins)) : 0;
      return { label: range.labels?.[k] ?? formatEdge(low + k), bins: [bin] };
    });
  }
  const per = Math.ceil(bins / MAX_ROWS);
  const rows: HeatmapRow[] = [];
  for (let start = 0; start < bins; start += per) {
    const members = Array.from({ length: Math.min(per, bins - start) }, (_, j) => start + j);
    const from = low + (span * start) / bins;
    const to = low + (span * (start + members.length)) / bins;
    rows.push({ label: `${formatEdge(from)}–${formatEdge(to)}`, bins: members });
  }
  return rows;
}

/**
 * Per round, the share of its valid values in each row: count / the histogram's total (its
 * valid values), so rounds of different sizes compare. A round without a histogram, or with
 * a different bin count than the first, is an empty column.
 */
export function opinionHeatmap(rounds: readonly SimulationRound[], range: ReturnType<typeof actionRange>): Heatmap {
  const first = rounds.find((r) => Array.isArray(r.histogram) && r.histogram.length > 0);
  const bins = first?.histogram.length ?? 0;
  const rows = heatmapRows(bins, range);
  let maxShare = 0;
  const shares = rows.map(() => new Array<number>(rounds.length).fill(0));
  rounds.forEach((round, column) => {
    const h = round.histogram;
    if (!Array.isArray(h) || h.length !== bins) return;
    const total = h.reduce((sum, c) => sum + c, 0);
    if (total <= 0) return;
    rows.forEach((row, r) => {
      const share = row.bins.reduce((sum, b) => sum + (h[b] ?? 0), 0) / total;
      shares[r]![column] = share;
      if (share > maxShare) maxShare = share;
    });
  });
  return { rounds: rounds.map((r) => r.round), rows, shares, maxShare };
}

/**
 * A cell's colour: a share of 0 is left blank (the page shows through); others on the ramp by
 * the square root of share / maxShare, so that a few percent stay visible beside a consensus.
 */
export function heatColour(share: number, maxShare: number): string | null {
  if (!(share > 0) || !(maxShare > 0)) return null;
  return rampColour(Math.sqrt(Math.min(1, share / maxShare)));
}

/** The heatmap's text alternative: per round, where most values were. */
export function heatmapSummary(map: Heatmap): string {
  if (map.rounds.length === 0 || map.rows.length === 0) return "No round has a histogram yet";
  const peaks = map.rounds.map((round, c) => {
    let best = -1;
    let share = 0;
    map.rows.forEach((_, r) => {
      const s = map.shares[r]![c]!;
      if (s > share) {
        share = s;
        best = r;
      }
    });
    return best < 0 ? null : { round, label: map.rows[best]!.label, share };
  });
  const known = peaks.filter((p): p is NonNullable<typeof p> => p !== null);
  const first = known[0];
  const last = known[known.length - 1];
  if (!first || !last) return `${map.rounds.length} rounds without valid values`;
  const describe = (p: NonNullable<(typeof peaks)[number]>) => `round ${p.round}: most agents at ${p.label} (${percent(p.share)})`;
  return `Share of agents per value over ${map.rounds.length} rounds, ${map.rows.length} value rows; ${describe(first)}${last !== first ? `; ${describe(last)}` : ""}`;
}

/** The compartments of an epidemic, when a run declares all three. */
export const COMPARTMENTS = ["susceptible", "infectious", "recovered"] as const;

export function hasCompartments(declared: ReadonlyArray<{ name: string }> | null | undefined): boolean {
  return Array.isArray(declared) && COMPARTMENTS.every((name) => declared.some((m) => m.name === name));
}

/** Whether any round sent values between workers (a network simulation over several processes). */
export function anyNetworkBytes(rounds: readonly SimulationRound[]): boolean {
  return rounds.some((r) => (r.network_bytes ?? 0) > 0);
}

/** Whether the run stored only the decisions that changed: some round wrote fewer rows than its
 * agents' decisions (rounds kept before rows were counted have none). */
export function storesChanges(rounds: readonly SimulationRound[]): boolean {
  return rounds.some(
    (r) => r.decisions_stored != null && r.decisions_stored < r.n_valid + r.n_invalid + r.n_late + (r.n_lost ?? 0),
  );
}

export function totalNetworkBytes(rounds: readonly SimulationRound[]): number {
  return rounds.reduce((sum, r) => sum + (r.network_bytes ?? 0), 0);
}
