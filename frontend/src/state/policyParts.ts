/**
 * A mixed population on the run page: who plays which policy (the run record's `policies`) and
 * a round broken down by policy (`metrics_by_policy`), as table rows. Pure, unit-tested.
 */

import type { PolicyBreakdown, PolicyPart } from "../api/types";

/** How a part's agents were picked, in words: "10 % of the agents", "education: doctorate", "the rest". */
export function partWho(part: PolicyPart): string {
  if (part.share !== undefined) return `${Number((part.share * 100).toFixed(6))} % of the agents`;
  if (part.attribute !== undefined) {
    const categories = part.categories ?? [];
    return categories.length ? `${part.attribute}: ${categories.join(", ")}` : `other ${part.attribute}`;
  }
  return "every agent";
}

export interface PolicyRow {
  label: string;
  kind: string;
  who: string;
  agents: number;
  /** Of the shown round (null: no round yet, or a part the round does not list). */
  valid: number | null;
  invalid: number | null;
  mean: number | null;
}

/** One row per part of a mixed policy, with the shown round's figures; [] for a plain policy. */
export function policyRows(parts: readonly PolicyPart[] | undefined, round: PolicyBreakdown | undefined): PolicyRow[] {
  if (!parts || parts.length < 2) return [];
  return parts.map((part) => {
    const stats = round?.[part.label];
    return {
      label: part.label,
      kind: part.kind,
      who: partWho(part),
      agents: part.agents,
      valid: stats ? stats.n_valid : null,
      invalid: stats ? stats.n_invalid + stats.n_late + stats.n_lost : null,
      mean: stats ? stats.mean : null,
    };
  });
}
