import { type FormEvent, type ReactNode, useState } from "react";
import { ApiError, errorMessage, isUnauthorized } from "../api/client";
import type { ValidationIssue } from "../api/types";
import { ErrorAlert } from "./ErrorAlert";
import { YamlEditor } from "./YamlEditor";

interface YamlCreateCardProps<T> {
  /** The card's id: the target of the page's "New …" button (aria-controls). */
  id: string;
  title: string;
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

/**
 * A "New …" card: a YAML file in an editor, sent to the manager as it is. A 422 marks every
 * problem at its line in the editor; any other failure is said above the buttons.
 */
export function YamlCreateCard<T>({ id, title, intro, editorLabel, initialText, submitLabel, doing, create, onCreated, onCancel, onUnauthorized }: YamlCreateCardProps<T>) {
  const [text, setText] = useState(initialText);
  const [issues, setIssues] = useState<ValidationIssue[]>([]);
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
        <YamlEditor label={editorLabel} value={text} onChange={setText} issues={issues} />
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
