import { type FormEvent, type ReactNode, useId, useMemo, useRef, useState } from "react";
import { type ApiClient, ApiError, errorMessage, isUnauthorized } from "../api/client";
import type { ValidationIssue } from "../api/types";
import { useOpenApi } from "../hooks/useOpenApi";
import { type PlacedIssue, placeIssues } from "../yaml/issues";
import { phraseFileIssue } from "../yaml/phrase";
import { ErrorAlert } from "./ErrorAlert";
import { ErrorSummary } from "./ErrorSummary";
import { YamlEditor, type YamlEditorHandle } from "./YamlEditor";

interface YamlCreateCardProps<T> {
  /** The card's id: the target of the page's "New …" button (aria-controls). */
  id: string;
  title: string;
  client: ApiClient;
  /** The config's model in the manager's OpenAPI document ("PopulationConfig"), for messages in words. */
  model: string;
  intro: ReactNode;
  editorLabel: string;
  initialText: string;
  submitLabel: string;
  /** What is being done, for the error: "Could not {doing}: …". */
  doing: string;
  create: (yamlText: string) => Promise<T>;
  onCreated: (created: T) => void;
  onCancel: () => void;
  onUnauthorized: (err: ApiError) => void;
}

/** Problems in the order of their lines in the file; those at no line last. */
function byLine(a: PlacedIssue, b: PlacedIssue): number {
  return (a.line ?? Infinity) - (b.line ?? Infinity);
}

/**
 * A "New …" card: a YAML file in an editor, sent to the manager as it is. A 422 is summed up
 * at the top of the form, which takes the focus, each problem in words with a button that puts
 * the cursor on its line, and marked at its line in the editor; any other failure is said
 * above the buttons.
 */
export function YamlCreateCard<T>({ id, title, client, model, intro, editorLabel, initialText, submitLabel, doing, create, onCreated, onCancel, onUnauthorized }: YamlCreateCardProps<T>) {
  const [text, setText] = useState(initialText);
  const [issues, setIssues] = useState<ValidationIssue[]>([]);
  const [attempt, setAttempt] = useState(0);
  const editor = useRef<YamlEditorHandle>(null);
  const errorsId = `${useId()}-errors`;
  const openapi = useOpenApi(client);
  const placed = useMemo(() => placeIssues(text, issues, (issue) => phraseFileIssue(issue, openapi, model)), [text, issues, openapi, model]);
  const [error, setError] = useState<string | null>(null);
  const [pending, setPending] = useState(false);

  async function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    setPending(true);
    setError(null);
    try {
      const created = await create(text);
      setIssues([]);
      onCreated(created);
    } catch (err) {
      setPending(false);
      if (isUnauthorized(err)) return onUnauthorized(err);
      if (err instanceof ApiError && err.status === 422 && err.issues.length > 0) {
        setIssues(err.issues);
        setAttempt((n) => n + 1);
      } else {
        setIssues([]);
        setError(`Could not ${doing}: ${errorMessage(err)}`);
      }
    }
  }

  return (
    <section id={id} className="card create-card" aria-labelledby={`${id}-heading`}>
      <h2 id={`${id}-heading`}>{title}</h2>
      <p className="muted">{intro}</p>
      <form onSubmit={submit} aria-busy={pending}>
        <div id={errorsId}>
          <ErrorSummary
            className="editor-errors"
            title={`The manager found ${placed.length} error${placed.length === 1 ? "" : "s"} in the config:`}
            items={[...placed].sort(byLine).map((p) => ({
              text: p.message,
              select: p.line !== null ? { label: `line ${p.line}`, onSelect: () => editor.current?.jumpTo(p.line as number) } : undefined,
            }))}
            attempt={attempt}
          />
        </div>
        <YamlEditor ref={editor} label={editorLabel} value={text} onChange={setText} placed={placed} errorsId={errorsId} />
        <ErrorAlert message={error} />
        <div className="form-actions">
          <button type="submit" className="button primary" disabled={pending}>
            {submitLabel}
          </button>
          <button type="button" className="button plain" onClick={onCancel}>
            Cancel
          </button>
        </div>
      </form>
    </section>
  );
}
