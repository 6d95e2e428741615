import { useEffect, useId, useMemo, useState } from "react";
import { type ApiClient, type ApiError, errorMessage, isUnauthorized } from "../api/client";
import { fetchPlugins } from "../api/plugins";
import type { Population } from "../api/types";
import { LaunchSimulationForm } from "../components/LaunchSimulationForm";
import { PluginLaunchForm } from "../components/PluginLaunchForm";
import { ErrorAlert } from "../components/ErrorAlert";
import { Field } from "../components/FormField";
import { Link } from "../components/Link";
import { useCanWrite } from "../role";
import { navigate, setSearchParams, useSearchParam } from "../router";
import { chosenPlugin, type DeclaredPlugin } from "../state/pluginLaunch";
import { isPlayable } from "../state/populations";

interface SimulationLaunchPageProps {
  client: ApiClient;
  onUnauthorized: (err: ApiError) => void;
}

/**
 * /simulations/new?plugin=NAME: the launch form of a simulation plugin. The guessing game has
 * its own form (LLM endpoints, prompts, level-k depths); any other plugin's is drawn from what
 * it declares. `population=ID` preselects a population, `clone=ID` prefills from a run (its
 * plugin unless the URL names one).
 */
export function SimulationLaunchPage({ client, onUnauthorized }: SimulationLaunchPageProps) {
  const canWrite = useCanWrite();
  const pickerId = useId();
  const requested = useSearchParam("plugin");
  const cloneId = Number(useSearchParam("clone")) || null;
  const preselected = Number(useSearchParam("population")) || null;
  const [plugins, setPlugins] = useState<DeclaredPlugin[] | null>(null);
  const [populations, setPopulations] = useState<Population[] | null>(null);
  const [clonedPlugin, setClonedPlugin] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    document.title = "New simulation · populace";
  }, []);

  // The installed plugins and the populations that can play (deployed or degraded).
  useEffect(() => {
    if (!canWrite) return;
    const controller = new AbortController();
    Promise.all([
      fetchPlugins(client, controller.signal),
      client.allPopulations({ signal: controller.signal }),
    ]).then(
      ([page, result]) => {
        setPlugins(page.items);
        setPopulations(result.populations.filter((p) => isPlayable(p.status)).sort((a, b) => b.id - a.id));
      },
      (err: unknown) => {
        if (controller.signal.aborted) return;
        if (isUnauthorized(err)) onUnauthorized(err);
        else setError(`Could not load the plugins and populations: ${errorMessage(err)}`);
      },
    );
    return () => controller.abort();
  }, [client, canWrite, onUnauthorized]);

  // A clone plays its run's plugin, unless the URL names another.
  useEffect(() => {
    setClonedPlugin(null);
    if (cloneId === null || requested || !canWrite) return;
    const controller = new AbortController();
    client.simulation(cloneId, controller.signal).then(
      (run) => setClonedPlugin((run.config as { plugin?: { name?: string } }).plugin?.name ?? "guess"),
      (err: unknown) => {
        if (controller.signal.aborted) return;
        if (isUnauthorized(err)) onUnauthorized(err);
        else setClonedPlugin("guess"); // the form says why the clone failed
      },
    );
    return () => controller.abort();
  }, [client, cloneId, requested, canWrite, onUnauthorized]);

  const choices = useMemo(() => {
    if (!populations || preselected === null) return populations;
    return [...populations].sort((a, b) => Number(b.id === preselected) - Number(a.id === preselected));
  }, [populations, preselected]);
  // A launch link to a population that is gone (or not deployed) says so instead of quietly
  // offering another one.
  const missing = populations !== null && preselected !== null && !populations.some((p) => p.id === preselected);
  const waitingForClone = cloneId !== null && !requested && clonedPlugin === null;
  const name = plugins ? chosenPlugin(plugins, requested ?? clonedPlugin) : null;
  const plugin = plugins?.find((p) => p.name === name);

  const picker = plugins && (
    <Field id={`${pickerId}-plugin`} label="Simulation" errors={undefined}>
      {(props) => (
        <select {...props} value={name ?? ""} onChange={(e) => setSearchParams({ plugin: e.target.value, clone: null })}>
          {plugins.map((p) => (
            <option key={p.name} value={p.name}>
              {p.title} ({p.name})
            </option>
          ))}
        </select>
      )}
    </Field>
  );
  const common = {
    client,
    populations: choices ?? [],
    picker,
    onLaunched: (simulation: { id: number }) => navigate(`/simulations/${simulation.id}`),
    onCancel: () => navigate("/simulations"),
    onUnauthorized,
  };

  return (
    <main className="page">
      <div className="page-title">
        <h1>New simulation</h1>
        <Link className="push-right" href="/simulations">
          All simulations
        </Link>
      </div>
      {!canWrite && <p className="empty">This token only reads: launching a simulation needs the operator's token.</p>}
      <ErrorAlert message={error} />
      {canWrite && error === null && (choices === null || waitingForClone) && <p className="empty">Loading the launch form…</p>}
      {canWrite && missing && (
        <p className="alert" role="alert">
          Population {preselected} cannot be launched on: it was deleted or is not deployed. Choose another one below.
        </p>
      )}
      {canWrite && choices !== null && !waitingForClone && plugin && name === "guess" && <LaunchSimulationForm key="guess" {...common} />}
      {canWrite && choices !== null && !waitingForClone && plugin && name !== "guess" && <PluginLaunchForm key={plugin.name} plugin={plugin} {...common} />}
    </main>
  );
}
