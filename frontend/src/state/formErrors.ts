/**
 * The manager's 422 messages in a form's words. Pydantic writes "Input should be less than or
 * equal to 1000" or "Extra inputs are not permitted"; the forms say "Rounds must be between 1
 * and 1,000" and "unknown field 'rouns' — did you mean 'rounds'?".
 *
 * The manager sends each issue's `type`, `loc` and `msg` (no `ctx`), and some checks wrap
 * pydantic's message in one of their own (type "simulation_config", e.g. a plugin's params or a
 * sweep's point: "... (at point 2 (seed=1))"), so a message is recognised by its type and, when
 * that says nothing, by pydantic's wording. What the field allows (its label, range, choices,
 * sibling keys) comes from the form or the schema: `FieldFacts`. Pure, unit-tested.
 */

import type { ValidationIssue } from "../api/types";

export interface FieldFacts {
  /** The field as the form calls it ("Rounds"), or its path in a file ("base.rounds"). */
  label: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  integer?: boolean;
  /** The values a choice allows. */
  choices?: readonly (string | number)[];
  /** The keys the object holding this field takes (for "did you mean"). */
  knownKeys?: readonly string[];
}

/** The issue as the manager sends it; `ctx` when a client has one (pydantic's own errors). */
export type Issue = Pick<ValidationIssue, "loc" | "msg" | "type"> & { ctx?: Record<string, unknown> };

type Bound = { value: string; inclusive: boolean };

interface Reading {
  kind:
    | "range"
    | "integer"
    | "number"
    | "finite"
    | "boolean"
    | "text"
    | "list"
    | "mapping"
    | "missing"
    | "extra"
    | "choice"
    | "tooShort"
    | "tooLong"
    | "pattern"
    | "other";
  lower?: Bound;
  upper?: Bound;
  /** For tooShort / tooLong: the count and what is counted. */
  count?: string;
  unit?: "characters" | "items";
  options?: string[];
  pattern?: string;
}

// Pydantic's own wording (pydantic-core's messages), matched when the type does not say it.
const WORDING: ReadonlyArray<[RegExp, (m: RegExpExecArray) => Reading]> = [
  [/^Input should be greater than or equal to (\S+)$/, (m) => ({ kind: "range", lower: { value: m[1]!, inclusive: true } })],
  [/^Input should be greater than (\S+)$/, (m) => ({ kind: "range", lower: { value: m[1]!, inclusive: false } })],
  [/^Input should be less than or equal to (\S+)$/, (m) => ({ kind: "range", upper: { value: m[1]!, inclusive: true } })],
  [/^Input should be less than (\S+)$/, (m) => ({ kind: "range", upper: { value: m[1]!, inclusive: false } })],
  [/^Input should be a valid integer/, () => ({ kind: "integer" })],
  [/^Input should be a finite number/, () => ({ kind: "finite" })],
  [/^Input should be a valid number/, () => ({ kind: "number" })],
  [/^Input should be a valid boolean/, () => ({ kind: "boolean" })],
  [/^Input should be a valid string/, () => ({ kind: "text" })],
  [/^Input should be a valid (list|array|tuple)/, () => ({ kind: "list" })],
  [/^Input should be a valid dictionary/, () => ({ kind: "mapping" })],
  [/^Input should be an object/, () => ({ kind: "mapping" })],
  [/^Field required$/, () => ({ kind: "missing" })],
  [/^Extra inputs are not permitted$/, () => ({ kind: "extra" })],
  [/^String should have at least (\d+) characters?$/, (m) => ({ kind: "tooShort", count: m[1]!, unit: "characters" })],
  [/^String should have at most (\d+) characters?$/, (m) => ({ kind: "tooLong", count: m[1]!, unit: "characters" })],
  [/^String should match pattern '(.*)'$/, (m) => ({ kind: "pattern", pattern: m[1]! })],
  [/^(?:List|Value|Dictionary|Tuple|Set) should have at least (\d+) items?/, (m) => ({ kind: "tooShort", count: m[1]!, unit: "items" })],
  [/^(?:List|Value|Dictionary|Tuple|Set) should have at most (\d+) items?/, (m) => ({ kind: "tooLong", count: m[1]!, unit: "items" })],
  [/^Input should be ((?:'[^']*'(?:, | or )?)+)$/, (m) => ({ kind: "choice", options: [...m[1]!.matchAll(/'([^']*)'/g)].map((o) => o[1]!) })],
];

// Pydantic's types whose message we may not need to read.
const TYPES: Readonly<Record<string, Reading["kind"]>> = {
  missing: "missing",
  extra_forbidden: "extra",
  int_parsing: "integer",
  int_type: "integer",
  int_from_float: "integer",
  float_parsing: "number",
  float_type: "number",
  finite_number: "finite",
  bool_parsing: "boolean",
  bool_type: "boolean",
  string_type: "text",
  list_type: "list",
  dict_type: "mapping",
  model_type: "mapping",
  model_attributes_type: "mapping",
};

const BOUND_TYPES: Readonly<Record<string, [keyof Reading & ("lower" | "upper"), string, boolean]>> = {
  greater_than_equal: ["lower", "ge", true],
  greater_than: ["lower", "gt", false],
  less_than_equal: ["upper", "le", true],
  less_than: ["upper", "lt", false],
};

/** What an issue says, from its type and ctx, else from pydantic's wording of its message. */
function read(type: string | undefined, ctx: Record<string, unknown> | undefined, msg: string): Reading {
  const bound = type ? BOUND_TYPES[type] : undefined;
  if (bound && ctx && ctx[bound[1]] !== undefined) {
    return { kind: "range", [bound[0]]: { value: String(ctx[bound[1]]), inclusive: bound[2] } };
  }
  for (const [pattern, make] of WORDING) {
    const match = pattern.exec(msg);
    if (match) return make(match);
  }
  const byType = type ? TYPES[type] : undefined;
  return byType ? { kind: byType } : { kind: "other" };
}

/** "1000" → "1,000", "1000000.0" → "1,000,000", "0.5" as is: digits grouped as the forms show them. */
export function numberText(value: string | number): string {
  const raw = typeof value === "number" ? (Number.isInteger(value) && Math.abs(value) >= 1e21 ? value.toFixed(0) : String(value)) : value;
  const match = /^(-?)(\d+)(?:\.(\d+))?$/.exec(raw);
  if (!match) return raw;
  const [, sign, whole, fraction] = match;
  const grouped = whole!.length >= 4 ? whole!.replace(/\B(?=(\d{3})+(?!\d))/g, ",") : whole!;
  const decimals = fraction && /[1-9]/.test(fraction) ? `.${fraction}` : "";
  return `${sign}${grouped}${decimals}`;
}

/** Edit distance (insertions, deletions, substitutions, swaps of neighbours). */
function distance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, d[i - 2]![j - 2]! + 1);
      d[i]![j] = best;
    }
  }
  return d[a.length]![b.length]!;
}

/** The known key nearest to a mistyped one, when it is near enough to be a typo. */
export function didYouMean(key: string, known: readonly string[]): string | null {
  let best: string | null = null;
  let bestDistance = Infinity;
  for (const candidate of known) {
    const d = distance(key.toLowerCase(), candidate.toLowerCase());
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  const allowed = Math.max(1, Math.floor(key.length / 3));
  return best !== null && bestDistance <= allowed ? best : null;
}

function orList(items: readonly string[]): string {
  if (items.length <= 1) return items.join("");
  return `${items.slice(0, -1).join(", ")} or ${items[items.length - 1]}`;
}

/** "between 1 and 1,000", "at least 0", "more than 0 and at most 1,000". */
function rangeText(lower: Bound | undefined, upper: Bound | undefined): string {
  if (lower && upper && lower.inclusive && upper.inclusive) return `between ${numberText(lower.value)} and ${numberText(upper.value)}`;
  const low = lower && `${lower.inclusive ? "at least" : "more than"} ${numberText(lower.value)}`;
  const high = upper && `${upper.inclusive ? "at most" : "less than"} ${numberText(upper.value)}`;
  return [low, high].filter(Boolean).join(" and ");
}

function factBound(value: number | undefined, inclusive: boolean): Bound | undefined {
  return value === undefined ? undefined : { value: numberText(value), inclusive };
}

/**
 * The issue as a sentence about the field: "Rounds must be between 1 and 1,000", "Rounds must be
 * a whole number", "unknown field 'rouns' — did you mean 'rounds'?". A message the manager wrote
 * itself (not pydantic's) is kept, after the field's label.
 */
export function phraseIssue(issue: Issue, facts: FieldFacts): string {
  // A check that wraps pydantic's message adds where: " (at point 2 (seed=1))".
  const wrapped = /^(.*?)( \(at point .*\))$/s.exec(issue.msg);
  const msg = (wrapped ? wrapped[1]! : issue.msg).replace(/^Value error, /, "");
  const where = wrapped ? wrapped[2]! : "";
  const reading = read(issue.type, issue.ctx, msg);
  const label = facts.label;
  const say = (text: string) => `${label} ${text}${where}`;
  switch (reading.kind) {
    case "range": {
      // The bound the message names, the other one from what the field allows.
      const lower = reading.lower ?? factBound(facts.minimum, true) ?? factBound(facts.exclusiveMinimum, false);
      const upper = reading.upper ?? factBound(facts.maximum, true) ?? factBound(facts.exclusiveMaximum, false);
      return say(`must be ${rangeText(lower, upper)}`);
    }
    case "integer":
      return say("must be a whole number");
    case "number":
      return say(facts.integer ? "must be a whole number" : "must be a number");
    case "finite":
      return say("must be a finite number (not infinity or NaN)");
    case "boolean":
      return say("must be true or false");
    case "text":
      return say("must be text");
    case "list":
      return say("must be a list");
    case "mapping":
      return say("must be a mapping of keys to values");
    case "missing":
      return say("is required");
    case "extra": {
      const key = String(issue.loc[issue.loc.length - 1] ?? "");
      const near = facts.knownKeys ? didYouMean(key, facts.knownKeys) : null;
      const hint = near ? ` — did you mean '${near}'?` : facts.knownKeys?.length ? ` (known: ${facts.knownKeys.join(", ")})` : "";
      // The label of an unknown key is where it sits ("base"), if anywhere.
      const inside = label && label !== key ? ` in ${label}` : "";
      return `unknown field '${key}'${inside}${hint}${where}`;
    }
    case "choice": {
      const options = reading.options ?? facts.choices?.map(String) ?? [];
      return say(`must be one of ${orList(options.map((o) => `'${o}'`))}`);
    }
    case "tooShort":
      if (reading.unit === "characters" && reading.count === "1") return say("must not be empty");
      return say(`needs at least ${numberText(reading.count ?? "1")} ${reading.unit === "characters" ? "characters" : reading.count === "1" ? "item" : "items"}`);
    case "tooLong":
      return say(`takes at most ${numberText(reading.count ?? "0")} ${reading.unit === "characters" ? "characters" : "items"}`);
    case "pattern":
      return say(
        reading.pattern === "^[A-Za-z_][A-Za-z0-9_]*$"
          ? "must be a name of letters, digits and _ that does not start with a digit"
          : `must match the pattern ${reading.pattern}`,
      );
    case "other": {
      // "base_url must be an http(s) URL": the manager names the field by its key; say the label.
      const key = issue.loc[issue.loc.length - 1];
      if (label && typeof key === "string" && msg.startsWith(`${key} `)) return `${label}${msg.slice(key.length)}${where}`;
      return label ? `${label}: ${msg}${where}` : `${msg}${where}`;
    }
  }
}
