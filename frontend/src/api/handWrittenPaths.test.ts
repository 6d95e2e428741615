import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";

// Issue 30's measure of the generated client: string literals that start with "/api/" in the
// dashboard's code, tests and the generated schema.d.ts left out. A literal that is the path
// argument of the typed client (`api.GET("/api/…", …)`, or `QueryOf<"/api/…">`) is checked by
// tsc against the generated `paths`, so it counts as generated; any other is spelled by hand.
// Left today: the OpenAPI document's own path (not in `paths`) and the /api/docs page's route.
const MAX_HAND_WRITTEN = 3;

const SRC = join(__dirname, "..");
const GENERATED = join(SRC, "api", "schema.d.ts");
const LITERAL = /(["'`])\/api\//g;
// openapi-fetch's methods, whose path parameter is a key of `paths`, and typedApi.ts's
// QueryOf<P extends keyof paths>, a GET's query parameters.
const TYPED_CALL = /(\.(GET|POST|PUT|PATCH|DELETE)\(|\bQueryOf<)\s*$/;

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    const code = /\.tsx?$/.test(entry.name) && !/\.test\.tsx?$/.test(entry.name);
    return code && path !== GENERATED ? [path] : [];
  });
}

/** Each hand-written "/api/" literal of `text`, as "file:line: literal". */
function handWrittenPaths(file: string, text: string): string[] {
  const found: string[] = [];
  for (const match of text.matchAll(LITERAL)) {
    const start = match.index;
    const quote = match[1] as string;
    const end = text.indexOf(quote, start + 1);
    const literal = text.slice(start, end + 1);
    // A cast (`"/api/x" as never`) would slip an unknown path past the type check.
    const typed = TYPED_CALL.test(text.slice(0, start)) && !/^\s*as\b/.test(text.slice(end + 1));
    if (!typed) found.push(`${file}:${text.slice(0, start).split("\n").length}: ${literal}`);
  }
  return found;
}

describe("the dashboard's API paths", () => {
  it(`are the typed client's, but for at most ${MAX_HAND_WRITTEN} spelled by hand`, () => {
    const found = sources(SRC).flatMap((path) => handWrittenPaths(relative(SRC, path), readFileSync(path, "utf8")));
    expect(found.length, `hand-written /api/ paths:\n${found.join("\n")}`).toBeLessThanOrEqual(MAX_HAND_WRITTEN);
  });

  it("counts a path outside the typed client, and a typed one cast past its check", () => {
    const code = [
      'api.GET("/api/workers/{worker_id}", { params });',
      'api.POST(\n  "/api/sweeps", body);',
      'type Q = QueryOf<"/api/agents">;',
      'fetch(`/api/workers/${id}`);',
      'api.GET("/api/nowhere" as never);',
      "const docs = '/api/docs';",
    ].join("\n");
    expect(handWrittenPaths("x.ts", code)).toEqual(['x.ts:5: `/api/workers/${id}`', 'x.ts:6: "/api/nowhere"', "x.ts:7: '/api/docs'"]);
  });
});
