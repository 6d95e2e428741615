import type { ApiClient } from "../api/client";
import { type QueryOf, answer } from "../api/typedApi";

/**
 * Interviews of an agent: the wire shapes, asking one (the answer streams back as NDJSON, one
 * JSON object a line: deltas, then the stored interview) and the history's query. The parsing
 * is pure; `askInterview` only adds the request.
 */

export const MAX_QUESTION_CHARS = 2000;

export interface Interview {
  id: number;
  simulation_id: number;
  agent_id: number;
  question: string;
  answer: string;
  status: "answering" | "answered" | "failed";
  error: string | null;
  /** The exact prompt the worker sent to the LLM. */
  prompt: string;
  model: string;
  prompt_tokens: number;
  completion_tokens: number;
  created_at: string;
  finished_at: string | null;
}

export interface InterviewPage {
  items: Interview[];
  /** Newest first; the id to pass as `after` for older ones, null on the last page. */
  next_after: number | null;
}

export type InterviewEvent =
  | { type: "delta"; text: string }
  | { type: "done"; interview: Interview }
  | { type: "error"; detail: string };

/** Why the question cannot be sent, or null when it can. */
export function questionProblem(question: string): string | null {
  if (!question.trim()) return "Ask something.";
  if (question.length > MAX_QUESTION_CHARS) return `At most ${MAX_QUESTION_CHARS} characters (this is ${question.length}).`;
  return null;
}

function parseEvent(line: string): InterviewEvent {
  const value: unknown = JSON.parse(line);
  if (value && typeof value === "object" && "type" in value) {
    const event = value as { type: unknown };
    if (event.type === "delta" || event.type === "done" || event.type === "error") return value as InterviewEvent;
  }
  throw new Error(`Unexpected line from the manager: ${line.slice(0, 80)}`);
}

/** The complete lines of `buffer` as events, and the unfinished rest to keep for the next read. */
export function splitEvents(buffer: string): { events: InterviewEvent[]; rest: string } {
  const lines = buffer.split("\n");
  const rest = lines.pop() ?? "";
  return { events: lines.filter((line) => line.trim() !== "").map(parseEvent), rest };
}

/** The events of an NDJSON body as they arrive. */
export async function* readEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<InterviewEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      const { events, rest } = splitEvents(done ? `${buffer}\n` : buffer);
      buffer = rest;
      yield* events;
      if (done) return;
    }
  } finally {
    reader.releaseLock();
  }
}

/**
 * Ask the agent; `onDelta` gets the answer so far each time it grows. Resolves to the stored
 * interview (answered, or failed with its error); rejects when the manager refuses (ApiError)
 * or the stream ends without its last line.
 */
export async function askInterview(
  client: ApiClient,
  agentId: number,
  simulationId: number,
  question: string,
  onDelta: (answerSoFar: string) => void,
  signal?: AbortSignal,
): Promise<Interview> {
  const { data: stream } = await client.api.POST("/api/agents/{agent_id}/interviews", {
    params: { path: { agent_id: agentId } },
    body: { simulation_id: simulationId, question },
    headers: { Accept: "application/x-ndjson" },
    parseAs: "stream",
    signal,
  });
  if (!stream) throw new Error("The manager sent no answer.");
  let answerSoFar = "";
  for await (const event of readEvents(stream)) {
    if (event.type === "delta") {
      answerSoFar += event.text;
      onDelta(answerSoFar);
    } else if (event.type === "done") {
      return event.interview;
    } else {
      throw new Error(event.detail);
    }
  }
  throw new Error("The answer stopped before it was complete.");
}

/** The query of GET /api/agents/{id}/interviews: one simulation's (or every) interview, a page at a time. */
export function interviewsQuery(simulationId: number | null, after: number | null, limit: number): QueryOf<"/api/agents/{agent_id}/interviews"> {
  const query: QueryOf<"/api/agents/{agent_id}/interviews"> = { limit };
  if (simulationId !== null) query.simulation_id = simulationId;
  if (after !== null) query.after = after;
  return query;
}

/** One page of the agent's interviews, newest first. */
export function interviewsPage(client: ApiClient, agentId: number, query: QueryOf<"/api/agents/{agent_id}/interviews">, signal?: AbortSignal): Promise<InterviewPage> {
  const params = { path: { agent_id: agentId }, query };
  return answer(client.api.GET("/api/agents/{agent_id}/interviews", { params, signal })) as Promise<InterviewPage>;
}
