import { useState } from "react";
import { type ApiClient, type ApiError, errorMessage, isUnauthorized } from "../api/client";
import { useFetched } from "../hooks/useFetched";
import { usePopulationSimulations } from "../hooks/usePopulationSimulations";
import { useCanWrite } from "../role";
import { MAX_QUESTION_CHARS, askInterview, interviewsPage, interviewsQuery, questionProblem } from "../state/interviews";
import { RelativeTime } from "./RelativeTime";
import { LaunchOn } from "./LaunchOn";

const PAGE_SIZE = 10;

/** A run whose agents can be interviewed: the guessing game played by an LLM (offered first). */
export function interviewable(s: { policy?: string | null; plugin?: string | null }): boolean {
  return s.policy === "llm" && (s.plugin ?? "guess") === "guess";
}

interface InterviewPanelProps {
  client: ApiClient;
  agentId: number;
  populationId: number;
  onUnauthorized: (err: ApiError) => void;
}

/**
 * Interview the agent about one of its population's runs: the question goes to the agent's
 * worker, which answers in character with the run's LLM; the answer streams in, and every
 * interview is kept with the run (listed below, newest first). Viewers see the history only.
 */
export function InterviewPanel({ client, agentId, populationId, onUnauthorized }: InterviewPanelProps) {
  const canWrite = useCanWrite();
  const { simulations, simulationId, pick, error: simulationsError } = usePopulationSimulations(client, populationId, onUnauthorized, interviewable);
  // Whether the chosen run asked an LLM (null while its detail loads).
  const llm = useFetched(
    simulationId === null ? null : (signal) => client.simulation(simulationId, signal).then((detail) => detail.models.length > 0),
    [client, simulationId],
    { failure: "Could not load the simulation", onUnauthorized, clearOnReload: true },
  );
  const usesLlm = llm.data;
  const [question, setQuestion] = useState("");
  const [asking, setAsking] = useState(false);
  const [answer, setAnswer] = useState<string | null>(null);
  const [askError, setAskError] = useState<string | null>(null);
  const [cursors, setCursors] = useState<Array<number | null>>([null]);
  const [reload, setReload] = useState(0);
  const after = cursors[cursors.length - 1] ?? null;
  const interviews = useFetched(
    simulationId === null
      ? null
      : (signal) =>
          interviewsPage(client, agentId, interviewsQuery(simulationId, after, PAGE_SIZE), signal)
            .then((result) => ({ simulationId, items: result.items, next: result.next_after ?? null })),
    [client, agentId, simulationId, after, reload],
    { failure: "Could not load the interviews", onUnauthorized },
  );
  // Another simulation's interviews are not shown while this one's load runs (paging keeps the page until the next is in).
  const page = interviews.data?.simulationId === simulationId ? interviews.data : null;
  const error = simulationsError ?? llm.error ?? interviews.error;

  const problem = questionProblem(question);

  async function ask() {
    if (simulationId === null || problem !== null) return;
    setAsking(true);
    setAnswer("");
    setAskError(null);
    try {
      const done = await askInterview(client, agentId, simulationId, question.trim(), setAnswer);
      setAnswer(done.answer);
      if (done.status === "failed") setAskError(`The LLM failed: ${done.error ?? "no reason given"}`);
      else setQuestion("");
    } catch (err) {
      if (isUnauthorized(err)) onUnauthorized(err);
      else setAskError(errorMessage(err));
    } finally {
      setAsking(false);
      setCursors([null]);
      setReload((n) => n + 1);
    }
  }

  return (
    <section aria-labelledby="interview-heading" data-testid="agent-interviews">
      <h2 id="interview-heading">Interview</h2>
      {simulations !== null && simulations.length === 0 && <p className="empty">
          No simulation has played on this agent's population yet. <LaunchOn populationId={populationId} />
        </p>}
      {simulations !== null && simulations.length > 0 && (
        <div className="filters">
          <div>
            <label htmlFor="interview-simulation">About simulation</label>
            <select
              id="interview-simulation"
              value={simulationId === null ? "" : String(simulationId)}
              disabled={asking}
              onChange={(e) => {
                pick(Number(e.target.value));
                setCursors([null]);
                setAnswer(null);
                setAskError(null);
              }}
            >
              {simulations.map((s) => (
                <option key={s.id} value={String(s.id)}>
                  #{s.id} {s.name} ({s.status})
                </option>
              ))}
            </select>
          </div>
        </div>
      )}
      {usesLlm === false && <p className="empty">Simulation {simulationId} used no LLM: its agents cannot be interviewed about it.</p>}
      {canWrite && usesLlm === true && (
        <form
          className="interview-form"
          onSubmit={(e) => {
            e.preventDefault();
            void ask();
          }}
        >
          <label htmlFor="interview-question">Question</label>
          <textarea
            id="interview-question"
            rows={3}
            style={{ width: "100%", maxWidth: "48rem" }}
            maxLength={MAX_QUESTION_CHARS}
            value={question}
            disabled={asking}
            placeholder="Why did you choose your numbers?"
            onChange={(e) => setQuestion(e.target.value)}
          />
          <div className="form-actions">
            <button type="submit" className="button primary" disabled={asking || problem !== null}>
              {asking ? "Answering…" : "Ask"}
            </button>
          </div>
        </form>
      )}
      {answer !== null && (
        <blockquote className="persona" data-testid="interview-answer" aria-live="polite" aria-busy={asking}>
          {answer || (asking ? "…" : "(no answer)")}
        </blockquote>
      )}
      {askError !== null && (
        <p className="alert" role="alert">
          {askError}
        </p>
      )}
      {error !== null && (
        <p className="alert" role="alert">
          {error}
        </p>
      )}
      {page && page.items.length === 0 && <p className="empty">No interview about simulation {simulationId} yet.</p>}
      {page && page.items.length > 0 && (
        <ol className="interview-list" aria-label="Past interviews">
          {page.items.map((item) => (
            <li key={item.id} data-testid="interview" data-status={item.status}>
              <p>
                <strong>Q:</strong> {item.question}
              </p>
              <p>
                <strong>A:</strong> {item.answer || <span className="muted">(no answer)</span>}
              </p>
              <p className="muted">
                {item.status}
                {item.error ? `: ${item.error}` : ""} · {item.model || "no model"} · {item.prompt_tokens > 0 ? `${item.prompt_tokens} prompt / ` : ""}
                {item.completion_tokens} completion tokens ·{" "}
                <RelativeTime iso={item.created_at} />
              </p>
              <details>
                <summary>Prompt sent</summary>
                <pre className="transcript-text" tabIndex={0} aria-label="Prompt">{item.prompt}</pre>
              </details>
            </li>
          ))}
        </ol>
      )}
      {page && (cursors.length > 1 || page.next !== null) && (
        <div className="pager">
          <button type="button" className="button plain" disabled={cursors.length <= 1} onClick={() => setCursors(cursors.slice(0, -1))}>
            Newer
          </button>
          <button type="button" className="button plain" disabled={page.next === null} onClick={() => setCursors([...cursors, page.next])}>
            Older
          </button>
        </div>
      )}
    </section>
  );
}
