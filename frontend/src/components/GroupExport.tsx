import { useState } from "react";
import { type ApiClient, type ApiError, errorMessage, isUnauthorized } from "../api/client";
import type { GroupExportFormat } from "../api/types";
import { formatFileSize } from "../format";
import { saveBlob } from "./saveFile";

const FORMATS: readonly GroupExportFormat[] = ["csv", "jsonl"];

/**
 * Every kept round's group metrics as a file (one row per group per round), fetched with the
 * token in the Authorization header: never a token in a download URL.
 */
export function GroupExport({ client, simulationId, onUnauthorized }: { client: ApiClient; simulationId: number; onUnauthorized: (err: ApiError) => void }) {
  const [exporting, setExporting] = useState<GroupExportFormat | null>(null);
  const [result, setResult] = useState<{ ok: boolean; text: string } | null>(null);

  async function download(format: GroupExportFormat) {
    setExporting(format);
    setResult(null);
    try {
      const { blob, filename } = await client.exportGroups(simulationId, format);
      saveBlob(blob, filename);
      setResult({ ok: true, text: `Downloaded ${filename} (${formatFileSize(blob.size)})` });
    } catch (err) {
      if (isUnauthorized(err)) onUnauthorized(err);
      setResult({ ok: false, text: `Could not export the group metrics: ${errorMessage(err)}` });
    } finally {
      setExporting(null);
    }
  }

  return (
    <div className="group-export">
      <div className="inline-actions">
        {FORMATS.map((format) => (
          <button key={format} type="button" className="button plain" disabled={exporting !== null} onClick={() => void download(format)}>
            Export groups {format.toUpperCase()}
          </button>
        ))}
      </div>
      <p className={result?.ok === false ? "alert" : "muted"} role="status" aria-label="Group export result">
        {exporting ? `Exporting ${exporting.toUpperCase()}…` : (result?.text ?? "")}
      </p>
    </div>
  );
}
