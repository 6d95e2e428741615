/**
 * A config file's 422 issues in words (state/formErrors.ts): "size must be between 1 and
 * 1,000,000", "unknown field 'rouns' in base — did you mean 'rounds'?". The range and the keys
 * a field allows come from the manager's OpenAPI document; a sweep's `base` and `grid` keys are
 * simulation config fields, looked up there.
 */

import type { ValidationIssue } from "../api/types";
import { phraseIssue } from "../state/formErrors";
import { type JsonSchema, modelSchema, schemaFacts } from "../state/schemaForm";
import { formatLoc, type LocPart } from "./locate";

/** The model and the path inside it where a file's `loc` is described. */
export function describedAt(model: string, loc: readonly LocPart[]): { model: string; loc: LocPart[] } {
  const path = loc[0] === "body" ? loc.slice(1) : [...loc];
  if (model === "SweepConfig" && path[0] === "base") return { model: "SimulationConfig", loc: path.slice(1) };
  // grid: {"policy.latency_s": [values]}: each value is that field's.
  if (model === "SweepConfig" && path[0] === "grid" && typeof path[1] === "string" && path.length > 2) {
    return { model: "SimulationConfig", loc: path[1].split(".") };
  }
  return { model, loc: path };
}

/** The issue as a sentence naming its place in the file; `openapi` null: without ranges or keys. */
export function phraseFileIssue(issue: ValidationIssue, openapi: JsonSchema | null, model: string): string {
  const path = issue.loc[0] === "body" ? issue.loc.slice(1) : issue.loc;
  const where = describedAt(model, path);
  const schema = openapi ? modelSchema(openapi, where.model) : null;
  const facts = openapi && schema ? schemaFacts(openapi, schema, where.loc) : {};
  // An unknown key is named by itself; its label is where it sits (nothing at the top).
  const extra = issue.type === "extra_forbidden" || /^Extra inputs are not permitted/.test(issue.msg);
  const label = extra ? (path.length > 1 ? formatLoc(path.slice(0, -1)) : "") : formatLoc(path);
  return phraseIssue(issue, { ...facts, label });
}
