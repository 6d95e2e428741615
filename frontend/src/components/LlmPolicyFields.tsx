import { type ReactNode, useState } from "react";
import { type ApiClient, type ApiError, errorMessage, isUnauthorized } from "../api/client";
import type { components } from "../api/schema";
import { answer } from "../api/typedApi";
import {
  type EndpointProbe,
  type EndpointRow,
  type LaunchField,
  type LlmSettings,
  SERVER_LABELS,
  type ServerKind,
  batchSizePlaceholder,
  concurrencyPlaceholder,
  defaultAgentDeadline,
  endpointConfig,
  newEndpointRow,
  probeText,
} from "../state/launch";
import { Check, Field } from "./FormField";

type Errors = Partial<Record<LaunchField, string[]>>;
type Bounds = { min?: number; max?: number; step?: string };

/**
 * The LLM policy's settings: the API, temperature, deadline per answer, stored responses and
 * the endpoints (each tested on the workers with Test connection). The guessing game's form adds
 * its prompt choices (`before`) and its own checks (`checks`); a plugin's form uses it as is.
 */
export function LlmPolicyFields({
  client,
  populationId,
  idOf,
  settings,
  onChange,
  errors,
  bounds,
  onUnauthorized,
  before,
  checks,
}: {
  client: ApiClient;
  populationId: string;
  /** The form's id maker: controls get idOf("temperature"), idOf("endpoint-0-url"), ... */
  idOf: (name: string) => string;
  settings: LlmSettings;
  onChange: (changes: Partial<LlmSettings>) => void;
  errors: Errors;
  /** A number input's range from the config schema, by its loc. */
  bounds: (...loc: (string | number)[]) => Bounds;
  onUnauthorized: (err: ApiError) => void;
  before?: ReactNode;
  checks?: ReactNode;
}) {
  const [probes, setProbes] = useState<{ results: EndpointProbe[] | null; error: string | null; pending: boolean }>({ results: null, error: null, pending: false });

  function setEndpoint(row: number, changes: Partial<EndpointRow>) {
    setProbes({ results: null, error: null, pending: false });
    onChange({ endpoints: settings.endpoints.map((e, i) => (i === row ? { ...e, ...changes } : e)) });
  }

  async function testConnection() {
    setProbes({ results: null, error: null, pending: true });
    try {
      // The form builds the endpoints loosely; the manager validates them and names what is wrong.
      const body = { population_id: Number(populationId), endpoints: settings.endpoints.map(endpointConfig) } as components["schemas"]["LlmTestRequest"];
      const result = await answer(client.api.POST("/api/llm/test", { body }));
      setProbes({ results: result.endpoints, error: null, pending: false });
    } catch (err) {
      if (isUnauthorized(err)) return onUnauthorized(err);
      setProbes({ results: null, error: `Could not test the endpoints: ${errorMessage(err)}`, pending: false });
    }
  }

  return (
    <fieldset className="form-grid">
      <legend>LLM</legend>
      {before}
            <Field id={idOf("api")} label="API" errors={undefined} hint="Completions for base models such as Gemma 3 270M.">
              {(props) => (
                <select {...props} value={settings.api} onChange={(e) => onChange({ api: e.target.value as LlmSettings["api"] })}>
                  <option value="chat">chat completions</option>
                  <option value="completions">completions</option>
                </select>
              )}
            </Field>
            <Field id={idOf("temperature")} label="Temperature" errors={errors.temperature}>
              {(props) => <input {...props} type="number" {...bounds("policy", "llm", "temperature")} step="0.1" value={settings.temperature} onChange={(e) => onChange({ temperature: e.target.value })} />}
            </Field>
            <Field id={idOf("agent-deadline")} label="Deadline per answer (s, optional)" errors={errors.agentDeadline} hint={`One agent's answer, retries included. Blank: ${defaultAgentDeadline} s.`}>
              {(props) => <input {...props} type="number" {...bounds("deadlines", "agent_s")} min={0} step="any" value={settings.agentDeadline} onChange={(e) => onChange({ agentDeadline: e.target.value })} />}
            </Field>
      {checks}
            <Check
              id={idOf("store-responses")}
              label="Store responses"
              checked={settings.storeResponses}
              errors={errors.storeResponses}
              onChange={(v) => onChange({ storeResponses: v })}
              hint="Keep every answer's text, for the transcripts (more storage)."
            />
            {errors.endpoints && <p className="field-error wide">{errors.endpoints.join("; ")}</p>}
            {settings.endpoints.map((row, i) => (
              <EndpointFields
                key={i}
                id={idOf(`endpoint-${i}`)}
                index={i}
                row={row}
                errors={errors}
                probe={probes.results?.[i] ?? null}
                bounds={(field) => bounds("policy", "llm", "endpoints", i, ...field)}
                removable={settings.endpoints.length > 1}
                onChange={(changes) => setEndpoint(i, changes)}
                onRemove={() => {
                  setProbes({ results: null, error: null, pending: false });
                  onChange({ endpoints: settings.endpoints.filter((_, j) => j !== i) });
                }}
              />
            ))}
            <div className="form-actions wide">
              <button
                type="button"
                className="button plain"
                onClick={() => onChange({ endpoints: [...settings.endpoints, { ...newEndpointRow, ...(settings.endpoints[settings.endpoints.length - 1] ?? {}), baseUrl: "" }] })}
              >
                Add endpoint
              </button>
              <button type="button" className="button plain" disabled={probes.pending || !populationId} onClick={() => void testConnection()}>
                {probes.pending ? "Testing…" : "Test connection"}
              </button>
              {probes.error !== null && (
                <span className="field-error" role="alert">
                  {probes.error}
                </span>
              )}
            </div>
    </fieldset>
  );
}

/** One endpoint row: where, which model, how many requests at once, what it costs. */
function EndpointFields({
  id,
  index,
  row,
  errors,
  probe,
  bounds,
  removable,
  onChange,
  onRemove,
}: {
  id: string;
  index: number;
  row: EndpointRow;
  errors: Errors;
  probe: EndpointProbe | null;
  /** A field's range from the config schema (["max_concurrency"], ["price", "prompt_per_million"]). */
  bounds: (field: string[]) => { min?: number; max?: number; step?: string };
  removable: boolean;
  onChange: (changes: Partial<EndpointRow>) => void;
  onRemove: () => void;
}) {
  const n = index + 1;
  const err = (field: string) => errors[`endpoints.${index}.${field}` as LaunchField];
  const result = probe ? probeText(probe, row.model.trim()) : null;
  return (
    <fieldset className="form-grid endpoint-row wide" aria-label={`Endpoint ${n}`} data-testid={`endpoint-${n}`}>
      <legend>Endpoint {n}</legend>
      <Field id={`${id}-url`} label={`Endpoint ${n} URL`} errors={err("baseUrl")} hint="An OpenAI-compatible server (vLLM, llama.cpp).">
        {(props) => <input {...props} type="url" value={row.baseUrl} onChange={(e) => onChange({ baseUrl: e.target.value })} />}
      </Field>
      <Field id={`${id}-model`} label={`Endpoint ${n} model`} errors={err("model")}>
        {(props) => <input {...props} value={row.model} onChange={(e) => onChange({ model: e.target.value })} />}
      </Field>
      <Field id={`${id}-server`} label={`Endpoint ${n} server`} errors={undefined}>
        {(props) => (
          <select {...props} value={row.server} onChange={(e) => onChange({ server: e.target.value as EndpointRow["server"] })}>
            {(Object.entries(SERVER_LABELS) as [ServerKind, string][]).map(([server, label]) => (
              <option key={server} value={server}>
                {label}
              </option>
            ))}
          </select>
        )}
      </Field>
      <Field
        id={`${id}-key`}
        label={`Endpoint ${n} API key variable (on the workers)`}
        errors={err("apiKeyEnv")}
        hint="The name of an environment variable set on every worker, e.g. OPENAI_API_KEY. The key itself never goes through the manager. Blank: no key."
      >
        {(props) => <input {...props} value={row.apiKeyEnv} placeholder="OPENAI_API_KEY" autoComplete="off" spellCheck={false} onChange={(e) => onChange({ apiKeyEnv: e.target.value })} />}
      </Field>
      <Field id={`${id}-concurrency`} label={`Endpoint ${n} max concurrency (total over all workers)`} errors={err("maxConcurrency")}>
        {(props) => <input {...props} type="number" min={1} {...bounds(["max_concurrency"])} placeholder={concurrencyPlaceholder} value={row.maxConcurrency} onChange={(e) => onChange({ maxConcurrency: e.target.value })} />}
      </Field>
      <Field id={`${id}-batch`} label={`Endpoint ${n} prompts per request`} errors={err("batchSize")} hint="A prompt array per request (completions on vLLM or OpenAI); llama.cpp and chat take one.">
        {(props) => <input {...props} type="number" min={1} {...bounds(["batch_size"])} placeholder={batchSizePlaceholder} value={row.batchSize} onChange={(e) => onChange({ batchSize: e.target.value })} />}
      </Field>
      <Field id={`${id}-price-prompt`} label={`Endpoint ${n} USD per million prompt tokens`} errors={err("price")}>
        {(props) => <input {...props} type="number" {...bounds(["price", "prompt_per_million"])} min={0} step="any" placeholder="no price" value={row.pricePrompt} onChange={(e) => onChange({ pricePrompt: e.target.value })} />}
      </Field>
      <Field id={`${id}-price-completion`} label={`Endpoint ${n} USD per million completion tokens`} errors={undefined}>
        {(props) => <input {...props} type="number" {...bounds(["price", "completion_per_million"])} min={0} step="any" placeholder="no price" value={row.priceCompletion} onChange={(e) => onChange({ priceCompletion: e.target.value })} />}
      </Field>
      <div className="form-actions wide">
        {result && (
          <span className={result.ok ? "probe-ok" : "field-error"} role="status" aria-label={`Endpoint ${n} connection`}>
            {result.text}
          </span>
        )}
        {removable && (
          <button type="button" className="button plain small" onClick={onRemove}>
            Remove endpoint {n}
          </button>
        )}
      </div>
    </fieldset>
  );
}

/** The id of the control a field's problem links to (f: the form's id maker). */
export function launchControlId(field: LaunchField, f: (name: string) => string): string | null {
  const row = /^endpoints\.(\d+)\.(\w+)$/.exec(field);
  if (row) {
    const names: Record<string, string> = { baseUrl: "url", model: "model", apiKeyEnv: "key", maxConcurrency: "concurrency", batchSize: "batch", price: "price-prompt" };
    return f(`endpoint-${row[1]}-${names[row[2] ?? ""] ?? "url"}`);
  }
  const ids: Partial<Record<LaunchField, string>> = {
    population: "population",
    name: "name",
    rule: "rule",
    rounds: "rounds",
    prompt: "system",
    policy: "policy",
    endpoints: "endpoint-0-url",
    temperature: "temperature",
    integerAnswers: "integer",
    feedback: "feedback",
    agentDeadline: "agent-deadline",
    roundDeadline: "round-deadline",
    storeResponses: "store-responses",
    defaultDepth: "depth",
    noiseStd: "noise",
    depthAttribute: "depth-attribute",
    depthByCategory: "depth-attribute",
    latency: "latency",
    llmShare: "llm-share",
    segmentBy: "segments",
    seed: "seed",
    allowPartial: "partial",
  };
  const name = ids[field];
  return name ? f(name) : null;
}
