import { type FormEvent, type ReactNode, useEffect, useId, useMemo, useState } from "react";
import { ApiError, type ApiClient, errorMessage, isUnauthorized } from "../api/client";
import type { Population, Simulation, SimulationDetail, ValidationIssue } from "../api/types";
import { useOpenApi } from "../hooks/useOpenApi";
import { usePopulationCategories } from "../hooks/usePopulationCategories";
import { useSearchParam } from "../router";
import {
  type DeclaredPlugin,
  type FieldProblem,
  initialPluginForm,
  isLlmPolicy,
  mixesLlm,
  paramFields,
  type PluginField,
  type PluginForm,
  phrasePluginIssues,
  pluginFormFromConfig,
  pluginLaunchConfig,
  policyFields,
} from "../state/pluginLaunch";
import { hostedText, populationChoice } from "../state/populations";
import type { LaunchField } from "../state/launch";
import { boundsAt, capitalised } from "../state/schemaForm";
import { ErrorSummary, type SummaryItem } from "./ErrorSummary";
import { Check, Field } from "./FormField";
import { LlmPolicyFields, launchControlId } from "./LlmPolicyFields";
import { SchemaFields, schemaFieldId } from "./SchemaFields";

interface PluginLaunchFormProps {
  client: ApiClient;
  plugin: DeclaredPlugin;
  /** Populations that can play (deployed or degraded) to choose from. */
  populations: Population[];
  /** The plugin picker, drawn first in the form. */
  picker: ReactNode;
  onLaunched: (simulation: Simulation) => void;
  onCancel: () => void;
  onUnauthorized: (err: ApiError) => void;
}

/**
 * The launch form of a plugin other than the guessing game, drawn from what the plugin declares:
 * its params and its policies' params from their JSON Schemas. The manager validates; a refusal
 * is summed up at the top of the form (which takes the focus) and said at each field.
 */
export function PluginLaunchForm({ client, plugin, populations, picker, onLaunched, onCancel, onUnauthorized }: PluginLaunchFormProps) {
  const id = useId();
  const f = (name: string) => `${id}-${name}`;
  const [form, setForm] = useState<PluginForm>(() => initialPluginForm(plugin, populations[0] ? String(populations[0].id) : ""));
  // What the manager refused, phrased at each render (with the config schema once it is in).
  const [refusal, setRefusal] = useState<{ issues: ValidationIssue[]; conflict: string | null }>({ issues: [], conflict: null });
  const [attempt, setAttempt] = useState(0);
  const [failure, setFailure] = useState<string | null>(null);
  const [pending, setPending] = useState(false);
  const [cloneNote, setCloneNote] = useState<string | null>(null);
  const openapi = useOpenApi(client);
  const categories = usePopulationCategories(client, form.populationId, onUnauthorized);
  const cloneId = Number(useSearchParam("clone")) || null;
  const params = useMemo(() => paramFields(plugin), [plugin]);
  const policy = plugin.policies.find((p) => p.name === form.policy);
  const policyParams = useMemo(() => policyFields(policy), [policy]);

  // ?clone=ID: the form from that run's stored config.
  useEffect(() => {
    if (cloneId === null) return;
    const controller = new AbortController();
    client.simulation(cloneId, controller.signal).then(
      (run: SimulationDetail) => {
        setForm(pluginFormFromConfig(plugin, run.config as unknown as Record<string, unknown>, run));
        setCloneNote(`Prefilled from simulation ${run.id} (${run.name}).`);
      },
      (err: unknown) => {
        if (controller.signal.aborted) return;
        if (isUnauthorized(err)) onUnauthorized(err);
        else setFailure(`Could not load simulation ${cloneId} to clone: ${errorMessage(err)}`);
      },
    );
    return () => controller.abort();
  }, [client, cloneId, plugin, onUnauthorized]);

  // A population chosen before the list arrived, or one that went away, falls back to the first.
  useEffect(() => {
    if (!populations.some((p) => String(p.id) === form.populationId) && populations[0]) {
      setForm((cur) => ({ ...cur, populationId: String(populations[0]?.id) }));
    }
  }, [populations, form.populationId]);

  function set<K extends keyof PluginForm>(key: K, value: PluginForm[K]) {
    setForm((cur) => ({ ...cur, [key]: value }));
  }

  async function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    setPending(true);
    setFailure(null);
    try {
      const simulation = await client.createSimulation(pluginLaunchConfig(plugin, form));
      setRefusal({ issues: [], conflict: null });
      onLaunched(simulation);
    } catch (err) {
      setPending(false);
      if (isUnauthorized(err)) return onUnauthorized(err);
      if (err instanceof ApiError && err.status === 422 && err.issues.length > 0) {
        setRefusal({ issues: err.issues, conflict: null });
      } else if (err instanceof ApiError && err.status === 409) {
        setRefusal({ issues: [], conflict: err.detail });
      } else {
        setRefusal({ issues: [], conflict: null });
        setFailure(`Could not launch the simulation: ${errorMessage(err)}`);
      }
      setAttempt((n) => n + 1);
    }
  }

  const problems: FieldProblem<PluginField>[] =
    refusal.conflict !== null ? [{ field: "population", text: refusal.conflict }] : phrasePluginIssues(plugin, policy, refusal.issues, openapi);
  const errorsAt = (field: PluginField) => {
    const list = problems.filter((p) => p.field === field).map((p) => p.text);
    return list.length ? list : undefined;
  };
  const byPrefix = (prefix: "param:" | "policyParam:") =>
    Object.fromEntries(
      problems.filter((p) => p.field.startsWith(prefix)).map((p) => [p.field.slice(prefix.length), problems.filter((q) => q.field === p.field).map((q) => q.text)]),
    );
  const llmErrors: Partial<Record<LaunchField, string[]>> = {};
  for (const p of problems) if (p.field.startsWith("llm:")) (llmErrors[p.field.slice(4) as LaunchField] ??= []).push(p.text);
  const targetOf = (field: PluginField): string | null => {
    if (field.startsWith("llm:")) return launchControlId(field.slice(4) as LaunchField, f);
    if (field.startsWith("param:")) return schemaFieldId(f("param"), field.slice("param:".length));
    if (field.startsWith("policyParam:")) return schemaFieldId(f("policy-param"), field.slice("policyParam:".length));
    const ids: Partial<Record<PluginField, string>> = { population: f("population"), name: f("name"), rounds: f("rounds"), seed: f("seed"), policy: f("policy"), llmShare: f("llm-share"), segmentBy: f("segments"), allowPartial: f("partial") };
    return ids[field] ?? null;
  };
  const summary: SummaryItem[] = problems.map((p) => ({ text: p.text, targetId: targetOf(p.field) }));
  const attributes = Object.keys(categories);
  const chosen = populations.find((p) => String(p.id) === form.populationId);
  const degraded = chosen?.status === "degraded";

  return (
    <section id="launch-simulation" className="card create-card" aria-labelledby={f("heading")}>
      <h2 id={f("heading")}>Launch a simulation</h2>
      <p className="muted">{plugin.description}</p>
      {cloneNote !== null && (
        <p className="notice" role="status" aria-label="Clone">
          {cloneNote}
        </p>
      )}
      <form onSubmit={submit} aria-busy={pending} noValidate>
        <ErrorSummary
          title={`The manager refused the config: ${problems.length} problem${problems.length === 1 ? "" : "s"}. Each links to its field.`}
          items={summary}
          attempt={attempt}
        />
        <div className="form-grid">
          {picker}
          <Field
            id={f("population")}
            label="Population"
            errors={errorsAt("population")}
            hint={degraded && chosen ? `Degraded: ${hostedText(chosen)}. Repair it on its page first, or allow partial below.` : undefined}
          >
            {(props) => (
              <select {...props} value={form.populationId} onChange={(e) => set("populationId", e.target.value)}>
                {populations.length === 0 && <option value="">No deployed population</option>}
                {populations.map((p) => (
                  <option key={p.id} value={String(p.id)}>
                    {populationChoice(p)}
                  </option>
                ))}
              </select>
            )}
          </Field>
          <Field id={f("name")} label="Name (optional)" errors={errorsAt("name")}>
            {(props) => <input {...props} value={form.name} onChange={(e) => set("name", e.target.value)} />}
          </Field>
          <Field id={f("rounds")} label="Rounds" errors={errorsAt("rounds")}>
            {(props) => <input {...props} type="number" inputMode="numeric" {...boundsAt(openapi, "SimulationConfig", ["rounds"])} value={form.rounds} onChange={(e) => set("rounds", e.target.value)} />}
          </Field>
          <Field id={f("seed")} label="Seed (optional)" errors={errorsAt("seed")} hint="The same seed plays the same run again. Blank: drawn at launch.">
            {(props) => <input {...props} inputMode="numeric" value={form.seed} onChange={(e) => set("seed", e.target.value)} />}
          </Field>
        </div>

        {params.length > 0 && (
          <fieldset className="form-grid">
            <legend>{plugin.title}</legend>
            <SchemaFields idPrefix={f("param")} fields={params} values={form.params} errors={byPrefix("param:")} onChange={(key, value) => set("params", { ...form.params, [key]: value })} />
          </fieldset>
        )}

        <fieldset className="form-grid">
          <legend>Policy</legend>
          <Field id={f("policy")} label="Policy" errors={errorsAt("policy")} hint={policy ? `${capitalised(policy.description)}${policy.uses_llm ? " (asks LLM endpoints)" : ""}` : undefined}>
            {(props) => (
              <select {...props} value={form.policy} onChange={(e) => set("policy", e.target.value)}>
                {plugin.policies.map((p) => (
                  <option key={p.name} value={p.name}>
                    {p.title}
                  </option>
                ))}
              </select>
            )}
          </Field>
          {policy && !isLlmPolicy(policy) && (
            <SchemaFields
              idPrefix={f("policy-param")}
              fields={policyParams}
              values={form.policyParams[policy.name] ?? {}}
              errors={byPrefix("policyParam:")}
              onChange={(key, value) => set("policyParams", { ...form.policyParams, [policy.name]: { ...(form.policyParams[policy.name] ?? {}), [key]: value } })}
            />
          )}
          {policy && !isLlmPolicy(policy) && plugin.policies.some(isLlmPolicy) && (
            <Field
              id={f("llm-share")}
              label="LLM agents (%, optional)"
              errors={errorsAt("llmShare")}
              hint="A mixed population: this share of the agents asks the LLM (set below), the rest follow the policy above. Who is which is drawn from the seed, with exact counts. Blank: none."
            >
              {(props) => <input {...props} type="number" min={0} max={100} step="any" value={form.llmShare} onChange={(e) => set("llmShare", e.target.value)} />}
            </Field>
          )}
        </fieldset>

        {(isLlmPolicy(policy) || mixesLlm(plugin, form)) && (
          <LlmPolicyFields
            client={client}
            populationId={form.populationId}
            idOf={f}
            settings={form.llm}
            onChange={(changes) => setForm((cur) => ({ ...cur, llm: { ...cur.llm, ...changes } }))}
            errors={llmErrors}
            bounds={(...loc) => boundsAt(openapi, "SimulationConfig", loc)}
            onUnauthorized={onUnauthorized}
          />
        )}

        <fieldset id={f("segments")} className="checkbox-group" tabIndex={-1} aria-describedby={errorsAt("segmentBy") ? f("segments-error") : undefined}>
          <legend>Break statistics down by</legend>
          {attributes.length === 0 && <p className="muted">The population's attributes appear here.</p>}
          {attributes.map((name) => (
            <label key={name} className="checkbox">
              <input
                type="checkbox"
                checked={form.segmentBy.includes(name)}
                onChange={(e) => set("segmentBy", e.target.checked ? [...form.segmentBy, name] : form.segmentBy.filter((s) => s !== name))}
              />
              {name}
            </label>
          ))}
          {errorsAt("segmentBy") && (
            <p id={f("segments-error")} className="field-error">
              {errorsAt("segmentBy")?.join("; ")}
            </p>
          )}
        </fieldset>

        <Check
          id={f("partial")}
          label="Allow partial"
          checked={form.allowPartial}
          errors={errorsAt("allowPartial")}
          onChange={(v) => set("allowPartial", v)}
          hint="Rounds complete over the agents live workers host; the others count as lost. Without it, a round that cannot reach every agent pauses the run."
        />

        {failure !== null && (
          <p className="alert" role="alert">
            {failure}
          </p>
        )}
        <div className="form-actions">
          <button type="submit" className="button primary" disabled={pending}>
            Launch simulation
          </button>
          <button type="button" className="button plain" onClick={onCancel}>
            Cancel
          </button>
        </div>
      </form>
    </section>
  );
}
