import { describe, expect, it } from "vitest";
import { ApiClient, ApiError } from "../api/client";
import { serializeQuery } from "../api/typedApi";
import { askInterview, interviewsQuery, questionProblem, readEvents, splitEvents } from "./interviews";

const DONE = {
  id: 4,
  simulation_id: 2,
  agent_id: 9,
  question: "Why?",
  answer: "Because it felt right.",
  status: "answered",
  error: null,
  prompt: "…\nInterviewer: Why?\nYou:",
  model: "m",
  prompt_tokens: 30,
  completion_tokens: 4,
  created_at: "2026-12-03T10:00:00.000Z",
  finished_at: "2026-12-03T10:00:01.000Z",
};

/** A body that arrives in the given pieces, cut anywhere (mid-line, mid-character). */
function streamOf(pieces: Uint8Array[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      for (const piece of pieces) controller.enqueue(piece);
      controller.close();
    },
  });
}

function cut(text: string, at: number[]): Uint8Array[] {
  const bytes = new TextEncoder().encode(text);
  const ends = [...at, bytes.length];
  return ends.map((end, i) => bytes.slice(i === 0 ? 0 : ends[i - 1], end));
}

const NDJSON = [
  JSON.stringify({ type: "delta", text: "Because " }),
  JSON.stringify({ type: "delta", text: "it felt ré" }),
  JSON.stringify({ type: "delta", text: "ght." }),
  JSON.stringify({ type: "done", interview: DONE }),
].join("\n");

describe("reading the stream", () => {
  it("keeps an unfinished line for the next read", () => {
    const { events, rest } = splitEvents('{"type":"delta","text":"a"}\n\n{"type":"del');
    expect(events).toEqual([{ type: "delta", text: "a" }]);
    expect(rest).toBe('{"type":"del');
  });

  it("yields every event whatever the pieces, multi-byte characters cut included", async () => {
    const accented = NDJSON.indexOf("é");
    const byteOfAccent = new TextEncoder().encode(NDJSON.slice(0, accented)).length + 1;
    const events = [];
    for await (const event of readEvents(streamOf(cut(NDJSON, [5, 40, byteOfAccent])))) events.push(event);
    expect(events.map((e) => e.type)).toEqual(["delta", "delta", "delta", "done"]);
    expect(events[1]).toEqual({ type: "delta", text: "it felt ré" });
  });

  it("refuses a line that is not an event", () => {
    expect(() => splitEvents('{"kind":"x"}\n')).toThrow(/Unexpected line/);
  });
});

describe("asking", () => {
  it("posts the question with the token, reports the answer as it grows, resolves to the stored interview", async () => {
    const calls: Array<{ input: string; init?: RequestInit }> = [];
    const fetchImpl = async (input: string, init?: RequestInit) => {
      calls.push({ input, init });
      return new Response(streamOf(cut(NDJSON, [20, 60])), { headers: { "Content-Type": "application/x-ndjson" } });
    };
    const grown: string[] = [];
    const done = await askInterview(new ApiClient("tok", fetchImpl), 9, 2, "Why?", (s) => grown.push(s));
    expect(done.id).toBe(4);
    expect(grown).toEqual(["Because ", "Because it felt ré", "Because it felt réght."]);
    const [call] = calls;
    expect(call?.input).toBe("/api/agents/9/interviews");
    expect(JSON.parse(String(call?.init?.body))).toEqual({ simulation_id: 2, question: "Why?" });
    const headers = new Headers(call?.init?.headers);
    expect(headers.get("Authorization")).toBe("Bearer tok");
    expect(headers.get("Accept")).toBe("application/x-ndjson");
  });

  it("rejects with the manager's refusal, an error line, or a stream cut short", async () => {
    const refused = async () => new Response(JSON.stringify({ detail: "agent 9 is not hosted by a live worker" }), { status: 409 });
    const err = await askInterview(new ApiClient("t", refused), 9, 2, "Why?", () => {}).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(409);

    const errorLine = async () => new Response('{"type":"delta","text":"a"}\n{"type":"error","detail":"could not be stored"}\n');
    await expect(askInterview(new ApiClient("t", errorLine), 9, 2, "Why?", () => {})).rejects.toThrow("could not be stored");

    const cutShort = async () => new Response('{"type":"delta","text":"a"}\n');
    await expect(askInterview(new ApiClient("t", cutShort), 9, 2, "Why?", () => {})).rejects.toThrow(/stopped/);
  });
});

describe("checks and queries", () => {
  it("says why a question cannot be sent", () => {
    expect(questionProblem("  ")).not.toBeNull();
    expect(questionProblem("x".repeat(2001))).toMatch(/2000/);
    expect(questionProblem("Why?")).toBeNull();
  });

  it("pages the history by simulation with the cursor", () => {
    // As the typed client sends it.
    const wire = (query: Record<string, unknown>) => `?${serializeQuery(query)}`;
    expect(wire(interviewsQuery(3, null, 10))).toBe("?limit=10&simulation_id=3");
    expect(wire(interviewsQuery(3, 17, 10))).toBe("?limit=10&simulation_id=3&after=17");
    expect(wire(interviewsQuery(null, null, 5))).toBe("?limit=5");
  });
});
