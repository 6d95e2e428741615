import { useEffect, useState } from "react";
import { type ApiClient, type ApiError, errorMessage, isUnauthorized } from "../api/client";
import { answer } from "../api/typedApi";
import type { Agent } from "../api/types";
import { AgentDecisions } from "../components/AgentDecisions";
import { AgentNeighbours } from "../components/AgentNeighbours";
import { AgentTranscripts } from "../components/AgentTranscripts";
import { InterviewPanel } from "../components/InterviewPanel";
import { Link } from "../components/Link";
import { PopulationName, usePopulations } from "../components/PopulationName";
import { agentNumber } from "../state/agents";

// No population to look up until the agent is loaded (a stable empty list).
const NO_IDS: readonly number[] = [];

interface AgentDetailPageProps {
  client: ApiClient;
  id: number;
  onUnauthorized: (err: ApiError) => void;
}

export function AgentDetailPage({ client, id, onUnauthorized }: AgentDetailPageProps) {
  const [agent, setAgent] = useState<Agent | null>(null);
  const [error, setError] = useState<{ status?: number; text: string } | null>(null);

  useEffect(() => {
    document.title = `Agent ${id} · populace`;
    const controller = new AbortController();
    (answer(client.api.GET("/api/agents/{agent_id}", { params: { path: { agent_id: id } }, signal: controller.signal })) as Promise<Agent>).then(setAgent, (err: unknown) => {
      if (controller.signal.aborted) return;
      if (isUnauthorized(err)) onUnauthorized(err);
      else setError({ status: (err as ApiError).status, text: errorMessage(err) });
    });
    return () => controller.abort();
  }, [client, id, onUnauthorized]);
  const populations = usePopulations(client, agent ? [agent.population_id] : NO_IDS, onUnauthorized);
  const population = agent ? populations.get(agent.population_id) : undefined;

  if (error) {
    return (
      <main className="page">
        <h1>Agent {id}</h1>
        <p className="alert" role="alert">
          {error.status === 404 ? `Agent ${id} does not exist (its population may have been deleted).` : error.text}
        </p>
      </main>
    );
  }

  return (
    <main className="page">
      {agent && (
        <p className="breadcrumb">
          <Link href="/populations">Populations</Link> / <PopulationName id={agent.population_id} population={population} compact /> /
        </p>
      )}
      <div className="page-title">
        <h1>Agent {id}</h1>
      </div>
      {!agent && <p className="empty">Loading agent…</p>}
      {agent && (
        <>
          <section aria-labelledby="placement-heading">
            <h2 id="placement-heading">Placement</h2>
            <dl className="facts">
              <dt>Population</dt>
              <dd>
                <PopulationName id={agent.population_id} population={population} />
              </dd>
              <dt>Number</dt>
              <dd title="Its place in the population: what the agent browser's Go to agent number takes">
                {agentNumber(agent.id, agent.population_id).toLocaleString("en-US")} in its population
              </dd>
              <dt>Worker</dt>
              <dd>
                {agent.worker_id === null ? "none" : <Link href={`/workers/${agent.worker_id}`}>Worker {agent.worker_id}</Link>}
                {agent.orphaned && " (orphaned: its worker was offline when the agent was deleted; the reaper removes it)"}
              </dd>
            </dl>
          </section>

          <section aria-labelledby="attributes-heading">
            <h2 id="attributes-heading">Attributes</h2>
            <div className="table-wrap narrow">
              <table className="data" aria-labelledby="attributes-heading">
                <tbody>
                  {Object.entries(agent.attributes).map(([name, value]) => (
                    <tr key={name}>
                      <th scope="row">{name}</th>
                      <td>{String(value)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          </section>

          <section aria-labelledby="persona-heading">
            <h2 id="persona-heading">Persona</h2>
            <blockquote className="persona">{agent.persona}</blockquote>
          </section>

          {/* Its neighbours in the population's graph (a short line without one). */}
          {population && population !== "missing" && (
            <AgentNeighbours key={id} client={client} agentId={id} population={population} onUnauthorized={onUnauthorized} />
          )}

          <section aria-labelledby="decisions-heading" data-testid="agent-decisions">
            <h2 id="decisions-heading">Decisions across simulations</h2>
            <AgentDecisions client={client} agentId={id} populationId={agent.population_id} onUnauthorized={onUnauthorized} />
          </section>

          <AgentTranscripts client={client} agentId={id} populationId={agent.population_id} onUnauthorized={onUnauthorized} />

          <InterviewPanel client={client} agentId={id} populationId={agent.population_id} onUnauthorized={onUnauthorized} />
        </>
      )}
    </main>
  );
}
