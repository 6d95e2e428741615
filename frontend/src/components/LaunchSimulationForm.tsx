import { type FormEvent, type ReactNode, useEffect, useId, useMemo, useState } from "react";
import { useOpenApi } from "../hooks/useOpenApi";
import { boundsAt } from "../state/schemaForm";
import { ErrorSummary, type SummaryItem } from "./ErrorSummary";
import { Check, Field } from "./FormField";
import { LlmPolicyFields, launchControlId } from "./LlmPolicyFields";
import { ApiError, type ApiClient, errorMessage, isUnauthorized } from "../api/client";
import { answer } from "../api/typedApi";
import type { Population, Simulation, SimulationDetail, ValidationIssue } from "../api/types";
import { useSearchParam } from "../router";
import {
  type LaunchField,
  type LaunchForm,
  estimateText,
  formFromConfig,
  initialLaunchForm,
  launchConfig,
  llmPercent,
  phraseLaunchIssues,
} from "../state/launch";
import { type RunEstimate, sharingText } from "../state/estimate";
import { hostedText, populationChoice } from "../state/populations";
import { RULE_PRESETS, type RulePreset, equilibrium, formatNumber, resolveRule } from "../state/simulations";

interface LaunchSimulationFormProps {
  client: ApiClient;
  /** Populations that can play (deployed or degraded) to choose from. */
  populations: Population[];
  /** The plugin picker of the launch page, drawn first in the form. */
  picker?: ReactNode;
  onLaunched: (simulation: Simulation) => void;
  onCancel: () => void;
  onUnauthorized: (err: ApiError) => void;
}

type Errors = Partial<Record<LaunchField, string[]>>;
type Problem = { field: LaunchField; text: string };

// The estimate is asked for once the form has been still this long.
const ESTIMATE_DEBOUNCE_MS = 400;

/**
 * The launch form. The manager validates (every number goes as typed), and each 422 message
 * shows at the control its `loc` names; a 409 (population unknown, not deployed, busy) shows
 * at the population.
 */
export function LaunchSimulationForm({ client, populations, picker, onLaunched, onCancel, onUnauthorized }: LaunchSimulationFormProps) {
  const id = useId();
  const openapi = useOpenApi(client);
  // A number input's range, from the manager's config schema (policy fields under their kind).
  const bounds = (...loc: (string | number)[]) => boundsAt(openapi, "SimulationConfig", loc);
  const [form, setForm] = useState<LaunchForm>(() => ({ ...initialLaunchForm, populationId: populations[0] ? String(populations[0].id) : "" }));
  // What the manager refused, phrased at each render (with the config schema once it is in).
  const [refusal, setRefusal] = useState<{ issues: ValidationIssue[]; conflict: string | null }>({ issues: [], conflict: null });
  const [attempt, setAttempt] = useState(0);
  const [failure, setFailure] = useState<string | null>(null);
  const [pending, setPending] = useState(false);
  const [categories, setCategories] = useState<Record<string, string[]>>({});
  const [estimate, setEstimate] = useState<RunEstimate | null>(null);
  const [cloneNote, setCloneNote] = useState<string | null>(null);
  const cloneId = Number(useSearchParam("clone")) || null;

  // ?clone=ID: every field from that run's stored config (the seed as the run's string).
  useEffect(() => {
    if (cloneId === null) return;
    const controller = new AbortController();
    client.simulation(cloneId, controller.signal).then(
      (run: SimulationDetail) => {
        const { form: cloned, unsupported } = formFromConfig(run.config as unknown as Record<string, unknown>, run);
        setForm(cloned);
        setCloneNote(
          `Prefilled from simulation ${run.id} (${run.name}).` +
            (unsupported.length ? ` Not carried over (not in this form): ${unsupported.join(", ")}.` : ""),
        );
      },
      (err: unknown) => {
        if (controller.signal.aborted) return;
        if (isUnauthorized(err)) onUnauthorized(err);
        else setFailure(`Could not load simulation ${cloneId} to clone: ${errorMessage(err)}`);
      },
    );
    return () => controller.abort();
  }, [client, cloneId, onUnauthorized]);

  // What the run would cost, for the form as it stands; hidden while the config does not validate.
  const configJson = useMemo(() => JSON.stringify(launchConfig(form)), [form]);
  useEffect(() => {
    const controller = new AbortController();
    const timer = setTimeout(() => {
      answer(client.api.POST("/api/simulations/estimate", { body: JSON.parse(configJson) as never, signal: controller.signal })).then(
        // The manager's estimate, with the sharing figures typed by hand (RunEstimate).
        (result) => setEstimate(result as RunEstimate),
        () => {
          if (!controller.signal.aborted) setEstimate(null);
        },
      );
    }, ESTIMATE_DEBOUNCE_MS);
    return () => {
      clearTimeout(timer);
      controller.abort();
    };
  }, [client, configJson]);

  // A population chosen before the list arrived, or one that went away, falls back to the first.
  useEffect(() => {
    if (!populations.some((p) => String(p.id) === form.populationId) && populations[0]) {
      setForm((f) => ({ ...f, populationId: String(populations[0]?.id) }));
    }
  }, [populations, form.populationId]);

  // The population's attributes, for "break down by" and level-k depths.
  useEffect(() => {
    const pid = Number(form.populationId);
    setCategories({});
    if (!pid) return;
    const controller = new AbortController();
    client.population(pid, controller.signal).then(
      (p) => setCategories(Object.fromEntries(Object.entries(p.counts ?? {}).map(([name, counts]) => [name, Object.keys(counts)]))),
      (err: unknown) => {
        if (!controller.signal.aborted && isUnauthorized(err)) onUnauthorized(err);
      },
    );
    return () => controller.abort();
  }, [client, form.populationId, onUnauthorized]);

  function set<K extends keyof LaunchForm>(key: K, value: LaunchForm[K]) {
    setForm((f) => ({ ...f, [key]: value }));
  }

  async function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    setPending(true);
    setFailure(null);
    try {
      const simulation = await client.createSimulation(launchConfig(form));
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

  const attributes = Object.keys(categories);
  const chosen = populations.find((p) => String(p.id) === form.populationId);
  const degraded = chosen?.status === "degraded";
  const rule = resolveRule({ preset: form.preset, ratio: null, offset: null, min: 0, max: 100 });
  const f = (name: string) => `${id}-${name}`;
  const problems: Problem[] = refusal.conflict !== null ? [{ field: "population", text: refusal.conflict }] : phraseLaunchIssues(refusal.issues, openapi);
  const errors: Errors = {};
  for (const p of problems) (errors[p.field] ??= []).push(p.text);
  const summary: SummaryItem[] = problems.map((p) => ({ text: p.text, targetId: launchControlId(p.field, f) }));

  return (
    <section id="launch-simulation" className="card create-card" aria-labelledby={f("heading")}>
      <h2 id={f("heading")}>Launch a simulation</h2>
      <p className="muted">
        Every agent of the population guesses a number each round; the winner is closest to the target. The manager checks the
        config and points at the field of every problem.
      </p>
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
            errors={errors.population}
            hint={
              degraded && chosen
                ? `Degraded: ${hostedText(chosen)}. Repair it on its page first, or allow partial below ` +
                  `(the ${(chosen.size - chosen.hosted).toLocaleString("en-US")} agents not hosted then count as lost).`
                : undefined
            }
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
          <Field id={f("name")} label="Name (optional)" errors={errors.name}>
            {(props) => <input {...props} value={form.name} onChange={(e) => set("name", e.target.value)} />}
          </Field>
          <Field
            id={f("rule")}
            label="Rule"
            errors={errors.rule}
            hint={`Equilibrium: ${formatNumber(equilibrium(rule))}`}
          >
            {(props) => (
              <select {...props} value={form.preset} onChange={(e) => set("preset", e.target.value as RulePreset)}>
                {Object.entries(RULE_PRESETS).map(([key, preset]) => (
                  <option key={key} value={key}>
                    target = {preset.label}
                  </option>
                ))}
              </select>
            )}
          </Field>
          <Field id={f("rounds")} label="Rounds" errors={errors.rounds}>
            {(props) => <input {...props} type="number" inputMode="numeric" {...bounds("rounds")} value={form.rounds} onChange={(e) => set("rounds", e.target.value)} />}
          </Field>
          <Field id={f("policy")} label="Policy" errors={errors.policy}>
            {(props) => (
              <select {...props} value={form.policy} onChange={(e) => set("policy", e.target.value as LaunchForm["policy"])}>
                <option value="llm">LLM</option>
                <option value="level_k">level-k (no LLM)</option>
                <option value="synthetic">synthetic (random, fixed latency)</option>
              </select>
            )}
          </Field>
          {form.policy !== "llm" && (
            <Field
              id={f("llm-share")}
              label="LLM agents (%, optional)"
              errors={errors.llmShare}
              hint="A mixed population: this share of the agents asks the LLM (set below), the rest follow the policy above. Who is which is drawn from the seed, with exact counts. Blank: none."
            >
              {(props) => <input {...props} type="number" min={0} max={100} step="any" value={form.llmShare} onChange={(e) => set("llmShare", e.target.value)} />}
            </Field>
          )}
          <Field id={f("seed")} label="Seed (optional)" errors={errors.seed}>
            {(props) => <input {...props} inputMode="numeric" value={form.seed} onChange={(e) => set("seed", e.target.value)} />}
          </Field>
          <Field id={f("round-deadline")} label="Deadline per round (s, optional)" errors={errors.roundDeadline} hint="Agents not done by then count as late. Blank: no limit.">
            {(props) => <input {...props} type="number" {...bounds("deadlines", "round_s")} min={0} step="any" value={form.roundDeadline} onChange={(e) => set("roundDeadline", e.target.value)} />}
          </Field>
        </div>

        {(form.policy === "llm" || llmPercent(form.llmShare) !== null) && (
          <fieldset className="form-grid">
            <legend>{form.policy === "llm" ? "LLM" : `LLM (${form.llmShare} % of the agents)`}</legend>
            <LlmPolicyFields
              client={client}
              populationId={form.populationId}
              idOf={f}
              settings={form}
              onChange={(changes) => setForm((cur) => ({ ...cur, ...changes }))}
              errors={errors}
              bounds={bounds}
              onUnauthorized={onUnauthorized}
              before={
                <>
            <Field id={f("system")} label="System prompt" errors={errors.prompt}>
              {(props) => (
                <select {...props} value={form.system} onChange={(e) => set("system", e.target.value as LaunchForm["system"])}>
                  <option value="plain">plain rules</option>
                  <option value="rational">all players are rational</option>
                  <option value="named">named: guess 2/3 of the average</option>
                  <option value="roleplay">role-play the agent's persona</option>
                </select>
              )}
            </Field>
            <Field id={f("user")} label="Answer mode" errors={undefined}>
              {(props) => (
                <select {...props} value={form.user} onChange={(e) => set("user", e.target.value as LaunchForm["user"])}>
                  <option value="basic">basic: report the number</option>
                  <option value="cot">chain of thought, then the number</option>
                </select>
              )}
            </Field>
                </>
              }
              checks={
                <>
            <Check
              id={f("integer")}
              label="Whole numbers only"
              checked={form.integerAnswers}
              errors={errors.integerAnswers}
              onChange={(v) => set("integerAnswers", v)}
              hint="The rules ask for a whole number and the answer allows no decimals; agents with identical prompts then need far fewer model calls."
            />
            <Check
              id={f("feedback")}
              label="Tell agents last round's mean too"
              checked={form.feedbackMean}
              errors={errors.feedback}
              onChange={(v) => set("feedbackMean", v)}
              hint="Agents are always told the previous winning number; this adds the mean of the guesses."
            />
                </>
              }
            />
          </fieldset>
        )}

        {form.policy === "level_k" && (
          <fieldset className="form-grid">
            <legend>Level-k</legend>
            <Field
              id={f("depth")}
              label="Default depth"
              errors={errors.defaultDepth}
              hint="Level 0 repeats last round's winning number; level k best-responds k times (x ← ratio·x + offset)."
            >
              {(props) => <input {...props} type="number" {...bounds("policy", "level_k", "default_depth")} value={form.defaultDepth} onChange={(e) => set("defaultDepth", e.target.value)} />}
            </Field>
            <Field id={f("noise")} label="Noise (std)" errors={errors.noiseStd}>
              {(props) => <input {...props} type="number" {...bounds("policy", "level_k", "noise_std")} step="0.1" value={form.noiseStd} onChange={(e) => set("noiseStd", e.target.value)} />}
            </Field>
            <Field id={f("depth-attribute")} label="Depth by attribute" errors={errors.depthAttribute}>
              {(props) => (
                <select
                  {...props}
                  value={form.depthAttribute}
                  onChange={(e) => setForm((cur) => ({ ...cur, depthAttribute: e.target.value, depthByCategory: {} }))}
                >
                  <option value="">none (every agent at the default depth)</option>
                  {attributes.map((name) => (
                    <option key={name} value={name}>
                      {name}
                    </option>
                  ))}
                </select>
              )}
            </Field>
            {form.depthAttribute &&
              (categories[form.depthAttribute] ?? []).map((category, i) => (
                <Field key={category} id={f(`depth-of-${i}`)} label={`Depth of ${category}`} errors={undefined}>
                  {(props) => (
                    <input
                      {...props}
                      type="number"
                      {...bounds("policy", "level_k", "default_depth")}
                      placeholder={form.defaultDepth}
                      value={form.depthByCategory[category] ?? ""}
                      onChange={(e) => set("depthByCategory", { ...form.depthByCategory, [category]: e.target.value })}
                    />
                  )}
                </Field>
              ))}
            {errors.depthByCategory && <p className="field-error">{errors.depthByCategory.join("; ")}</p>}
          </fieldset>
        )}

        {form.policy === "synthetic" && (
          <fieldset className="form-grid">
            <legend>Synthetic</legend>
            <Field id={f("latency")} label="Latency per agent (s)" errors={errors.latency} hint="Stands in for an LLM call; agents answer at random.">
              {(props) => <input {...props} type="number" {...bounds("policy", "synthetic", "latency_s")} step="0.1" value={form.latency} onChange={(e) => set("latency", e.target.value)} />}
            </Field>
          </fieldset>
        )}

        <fieldset id={f("segments")} className="checkbox-group" tabIndex={-1} aria-describedby={errors.segmentBy ? f("segments-error") : undefined}>
          <legend>Break statistics down by</legend>
          {attributes.length === 0 && <p className="muted">The population's attributes appear here.</p>}
          {attributes.map((name) => (
            <label key={name} className="checkbox">
              <input
                type="checkbox"
                checked={form.segmentBy.includes(name)}
                onChange={(e) =>
                  set("segmentBy", e.target.checked ? [...form.segmentBy, name] : form.segmentBy.filter((s) => s !== name))
                }
              />
              {name}
            </label>
          ))}
          {errors.segmentBy && (
            <p id={f("segments-error")} className="field-error">
              {errors.segmentBy.join("; ")}
            </p>
          )}
        </fieldset>

        <div className={errors.allowPartial?.length ? "field has-error" : degraded ? "field warning" : "field"}>
          <label className="checkbox">
            <input
              id={f("partial")}
              type="checkbox"
              checked={form.allowPartial}
              aria-describedby={f("partial-hint")}
              onChange={(e) => set("allowPartial", e.target.checked)}
            />
            Allow partial
          </label>
          <p id={f("partial-hint")} className="field-hint">
            Rounds complete over the agents live workers host; the others count as lost (shown on every round). Without it, a
            round that cannot reach every agent pauses the run.
          </p>
          {errors.allowPartial?.length ? <p className="field-error">{errors.allowPartial.join("; ")}</p> : null}
        </div>

        {estimate !== null && (
          <p className="notice" role="status" aria-label="Estimate" data-testid="launch-estimate">
            Estimate: {estimateText(estimate)}
            {sharingText(estimate) && <span className="estimate-sharing"> — {sharingText(estimate)}.</span>}
          </p>
        )}
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
