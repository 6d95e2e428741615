import { useMemo, useState } from "react";
import type { SimulationDetail } from "../api/types";
import { cliFile, configYaml } from "../state/configFile";
import { saveText } from "./saveFile";

type Shown = "stored" | "cli";

/**
 * The run's config as the manager stored it, and as a file `populace simulate FILE` plays
 * again; each can be copied or downloaded.
 */
export function RunConfig({ simulation }: { simulation: SimulationDetail }) {
  const [shown, setShown] = useState<Shown>("cli");
  const [note, setNote] = useState<string>("");
  const stored = useMemo(() => configYaml(simulation.config), [simulation.config]);
  const cli = useMemo(() => cliFile(simulation), [simulation]);
  const text = shown === "cli" ? cli : stored;
  const filename = shown === "cli" ? `simulation-${simulation.id}.yaml` : `simulation-${simulation.id}-config.yaml`;

  async function copy() {
    try {
      await navigator.clipboard.writeText(text);
      setNote("Copied to the clipboard.");
    } catch {
      // Clipboard access needs a secure context (https or localhost) and the page's focus.
      setNote("The browser refused the clipboard: select the text and copy it, or download it.");
    }
  }

  return (
    <section aria-labelledby="config-heading" data-testid="run-config">
      <div className="section-title">
        <h2 id="config-heading">Config</h2>
        <div className="segmented" role="group" aria-label="Config format">
          <button type="button" className="button plain small" aria-pressed={shown === "cli"} onClick={() => setShown("cli")}>
            CLI file
          </button>
          <button type="button" className="button plain small" aria-pressed={shown === "stored"} onClick={() => setShown("stored")}>
            As stored
          </button>
        </div>
        <div className="push-right inline-actions">
          <button type="button" className="button plain small" onClick={() => void copy()}>
            Copy
          </button>
          <button type="button" className="button plain small" onClick={() => saveText(text, filename, "application/yaml")}>
            Download {filename}
          </button>
        </div>
      </div>
      <p className="muted">
        {shown === "cli" ? (
          <>
            Run it again with <code>populace simulate {filename}</code>: same population, config and seed.
          </>
        ) : (
          "The config as the manager validated and stored it, defaults filled in."
        )}
      </p>
      <pre className="config-yaml" tabIndex={0} aria-label={shown === "cli" ? "CLI file" : "Stored config"} data-testid="config-text">
        {text}
      </pre>
      <p className="muted" role="status" aria-label="Config copy result">
        {note}
      </p>
    </section>
  );
}
