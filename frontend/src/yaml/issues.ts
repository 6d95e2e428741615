import type { ValidationIssue } from "../api/types";
import { formatLoc, lineFromMessage, locateInYaml } from "./locate";

export interface PlacedIssue {
  /** 1-based line, or null when the path is not in the text (e.g. a required key that is missing). */
  line: number | null;
  path: string;
  message: string;
}

/**
 * Places each 422 issue on a line of the current text; re-run on every edit so markers follow
 * their keys. `phrase` words a message (yaml/phrase.ts): its sentence names the place itself.
 */
export function placeIssues(text: string, issues: readonly ValidationIssue[], phrase?: (issue: ValidationIssue) => string): PlacedIssue[] {
  return issues.map((issue) => {
    // The manager could not read the text at all: the place is in the message, not the loc.
    const path = issue.loc.includes("(document)") ? "(document)" : formatLoc(issue.loc);
    const message = issue.msg.replace(/^\(document\): /, "");
    if (path === "(document)") return { line: lineFromMessage(message), path, message };
    const { line, exact } = locateInYaml(text, issue.loc);
    if (phrase) return { line, path, message: phrase(issue) };
    // A missing key has no line of its own: point at its parent and say which key.
    return { line, path, message: exact || line === null ? message : `${path}: ${message}` };
  });
}
