import { type FormEvent, type ReactNode, useEffect, useId, useState } from "react";
import { ApiError, type ApiClient, errorMessage, isUnauthorized } from "../api/client";
import type { Population, Simulation } from "../api/types";
import { type LaunchField, type LaunchForm, initialLaunchForm, issuesByField, launchConfig } from "../state/launch";
import { hostedText, populationChoice } from "../state/populations";
import { RULE_PRESETS, type RulePreset, equilibrium, formatNumber, resolveRule } from "../state/simulations";

interface LaunchSimulationFormProps {
  client: ApiClient;
  /** Populations that can play (deployed or degraded) to choose from. */
  populations: Population[];
  onLaunched: (simulation: Simulation) => void;
  onCancel: () => void;
  onUnauthorized: (err: ApiError) => void;
}

type Errors = Partial<Record<LaunchField, string[]>>;

/** A labelled control with the manager's messages for it right below, tied by aria-describedby. */
function Field({
  id,
  label,
  errors,
  hint,
  children,
}: {
  id: string;
  label: string;
  errors: string[] | undefined;
  hint?: string;
  children: (props: { id: string; "aria-invalid": boolean; "aria-describedby": string | undefined }) => ReactNode;
}) {
  const described = [hint ? `${id}-hint` : null, errors?.length ? `${id}-error` : null].filter(Boolean).join(" ") || undefined;
  return (
    <div className={errors?.length ? "field has-error" : "field"}>
      <label htmlFor={id}>{label}</label>
      {children({ id, "aria-invalid": !!errors?.length, "aria-describedby": described })}
      {hint && (
        <p id={`${id}-hint`} className="field-hint">
          {hint}
        </p>
      )}
      {errors?.length ? (
        <p id={`${id}-error`} className="field-error">
          {errors.join("; ")}
        </p>
      ) : null}
    </div>
  );
}

/**
 * The launch form. The manager validates (every number goes as typed), and each 422 message
 * shows at the control its `loc` names; a 409 (population unknown, not deployed, busy) shows
 * at the population.
 */
export function LaunchSimulationForm({ client, populations, onLaunched, onCancel, onUnauthorized }: LaunchSimulationFormProps) {
  const id = useId();
  const [form, setForm] = useState<LaunchForm>(() => ({ ...initialLaunchForm, populationId: populations[0] ? String(populations[0].id) : "" }));
  const [errors, setErrors] = useState<Errors>({});
  const [failure, setFailure] = useState<string | null>(null);
  const [pending, setPending] = useState(false);
  const [categories, setCategories] = useState<Record<string, string[]>>({});

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
      setErrors({});
      onLaunched(simulation);
    } catch (err) {
      setPending(false);
      if (isUnauthorized(err)) return onUnauthorized(err);
      if (err instanceof ApiError && err.status === 422 && err.issues.length > 0) {
        setErrors(issuesByField(err.issues));
      } else if (err instanceof ApiError && err.status === 409) {
        setErrors({ population: [err.detail] });
      } else {
        setErrors({});
        setFailure(`Could not launch the simulation: ${errorMessage(err)}`);
      }
    }
  }

  const attributes = Object.keys(categories);
  const chosen = populations.find((p) => String(p.id) === form.populationId);
  const degraded = chosen?.status === "degraded";
  const rule = resolveRule({ preset: form.preset, ratio: null, offset: null, min: 0, max: 100 });
  const problems = Object.values(errors).reduce((n, list) => n + (list?.length ?? 0), 0);
  const f = (name: string) => `${id}-${name}`;

  return (
    <section id="launch-simulation" className="card create-card" aria-labelledby={f("heading")}>
      <h2 id={f("heading")}>Launch a simulation</h2>
      <p className="muted">
        Every agent of the population guesses a number each round; the winner is closest to the target. The manager checks the
        config and points at the field of every problem.
      </p>
      <form onSubmit={submit} aria-busy={pending} noValidate>
        {problems > 0 && (
          <p className="alert" role="alert">
            The manager refused the config: {problems} problem{problems === 1 ? "" : "s"}, shown at {problems === 1 ? "its field" : "their fields"}.
            {errors.form ? ` ${errors.form.join("; ")}` : ""}
          </p>
        )}
        <div className="form-grid">
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
            {(props) => <input {...props} type="number" inputMode="numeric" value={form.rounds} onChange={(e) => set("rounds", e.target.value)} />}
          </Field>
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
          <Field id={f("policy")} label="Policy" errors={errors.policy}>
            {(props) => (
              <select {...props} value={form.policy} onChange={(e) => set("policy", e.target.value as LaunchForm["policy"])}>
                <option value="llm">LLM</option>
                <option value="level_k">level-k (no LLM)</option>
                <option value="synthetic">synthetic (random, fixed latency)</option>
              </select>
            )}
          </Field>
          <Field id={f("seed")} label="Seed (optional)" errors={errors.seed}>
            {(props) => <input {...props} type="number" inputMode="numeric" value={form.seed} onChange={(e) => set("seed", e.target.value)} />}
          </Field>
        </div>

        {form.policy === "llm" && (
          <fieldset className="form-grid">
            <legend>LLM</legend>
            <Field id={f("endpoint")} label="Endpoint URL" errors={errors.endpoint} hint="An OpenAI-compatible server (vLLM, llama.cpp).">
              {(props) => <input {...props} type="url" value={form.endpointUrl} onChange={(e) => set("endpointUrl", e.target.value)} />}
            </Field>
            <Field
              id={f("apiKeyEnv")}
              label="API key variable (on the workers)"
              errors={errors.apiKeyEnv}
              hint="The name of an environment variable set on every worker, e.g. OPENAI_API_KEY. The key itself never goes through the manager. Blank: no key."
            >
              {(props) => (
                <input
                  {...props}
                  value={form.apiKeyEnv}
                  placeholder="OPENAI_API_KEY"
                  autoComplete="off"
                  spellCheck={false}
                  onChange={(e) => set("apiKeyEnv", e.target.value)}
                />
              )}
            </Field>
            <Field id={f("model")} label="Model" errors={errors.model}>
              {(props) => <input {...props} value={form.model} onChange={(e) => set("model", e.target.value)} />}
            </Field>
            <Field id={f("server")} label="Server" errors={undefined}>
              {(props) => (
                <select {...props} value={form.server} onChange={(e) => set("server", e.target.value as LaunchForm["server"])}>
                  <option value="openai">OpenAI-compatible</option>
                  <option value="vllm">vLLM</option>
                  <option value="llama_cpp">llama.cpp</option>
                </select>
              )}
            </Field>
            <Field id={f("api")} label="API" errors={undefined} hint="Completions for base models such as Gemma 3 270M.">
              {(props) => (
                <select {...props} value={form.api} onChange={(e) => set("api", e.target.value as LaunchForm["api"])}>
                  <option value="chat">chat completions</option>
                  <option value="completions">completions</option>
                </select>
              )}
            </Field>
            <Field id={f("concurrency")} label="Max concurrency (total over all workers)" errors={errors.maxConcurrency}>
              {(props) => <input {...props} type="number" placeholder="by server: vllm 256, openai 64, llama_cpp 2" value={form.maxConcurrency} onChange={(e) => set("maxConcurrency", e.target.value)} />}
            </Field>
            <Field id={f("batch")} label="Prompts per request" errors={errors.batchSize} hint="A prompt array per request (completions on vLLM or OpenAI); llama.cpp and chat take one.">
              {(props) => <input {...props} type="number" min={1} placeholder="by server: vllm 16, openai 1, llama_cpp 1" value={form.batchSize} onChange={(e) => set("batchSize", e.target.value)} />}
            </Field>
            <Field id={f("temperature")} label="Temperature" errors={errors.temperature}>
              {(props) => <input {...props} type="number" step="0.1" value={form.temperature} onChange={(e) => set("temperature", e.target.value)} />}
            </Field>
            <div className={errors.integerAnswers?.length ? "field has-error" : "field"}>
              <label className="checkbox">
                <input
                  type="checkbox"
                  checked={form.integerAnswers}
                  aria-describedby={f("integer-hint")}
                  onChange={(e) => set("integerAnswers", e.target.checked)}
                />
                Whole numbers only
              </label>
              <p id={f("integer-hint")} className="field-hint">
                The rules ask for a whole number and the answer allows no decimals; agents with identical prompts then need far
                fewer model calls.
              </p>
              {errors.integerAnswers?.length ? <p className="field-error">{errors.integerAnswers.join("; ")}</p> : null}
            </div>
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
              {(props) => <input {...props} type="number" value={form.defaultDepth} onChange={(e) => set("defaultDepth", e.target.value)} />}
            </Field>
            <Field id={f("noise")} label="Noise (std)" errors={errors.noiseStd}>
              {(props) => <input {...props} type="number" step="0.1" value={form.noiseStd} onChange={(e) => set("noiseStd", e.target.value)} />}
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
              {(props) => <input {...props} type="number" step="0.1" value={form.latency} onChange={(e) => set("latency", e.target.value)} />}
            </Field>
          </fieldset>
        )}

        <fieldset className="checkbox-group" aria-describedby={errors.segmentBy ? f("segments-error") : undefined}>
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
