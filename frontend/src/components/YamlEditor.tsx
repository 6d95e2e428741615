import { type Ref, useId, useImperativeHandle, useMemo, useRef, useState } from "react";
import type { PlacedIssue } from "../yaml/issues";

/** What the form around the editor may do: put the cursor on a line (its error summary's buttons). */
export interface YamlEditorHandle {
  jumpTo: (line: number) => void;
}

interface YamlEditorProps {
  label: string;
  value: string;
  onChange: (value: string) => void;
  /** The manager's problems placed on their lines (yaml/issues.ts placeIssues). */
  placed: readonly PlacedIssue[];
  /** The id of the list of those problems (the form's error summary), which describes the editor. */
  errorsId?: string;
  ref?: Ref<YamlEditorHandle>;
}

/**
 * A plain textarea (so the keyboard, undo and paste work as everywhere) over a backdrop that
 * repeats its lines invisibly and writes each error after the end of its line: the message
 * shows at the field. The form lists the same errors in its summary, each with a button that
 * puts the cursor on its line (`jumpTo`).
 */
export function YamlEditor({ label, value, onChange, placed, errorsId, ref }: YamlEditorProps) {
  const id = useId();
  const textarea = useRef<HTMLTextAreaElement>(null);
  const [scroll, setScroll] = useState({ top: 0, left: 0 });
  const lines = useMemo(() => value.split("\n"), [value]);
  useImperativeHandle(ref, () => ({ jumpTo }));
  const byLine = useMemo(() => {
    const map = new Map<number, string[]>();
    for (const p of placed) if (p.line !== null) map.set(p.line, [...(map.get(p.line) ?? []), p.message]);
    return map;
  }, [placed]);

  function jumpTo(line: number) {
    const area = textarea.current;
    if (!area) return;
    const start = lines.slice(0, line - 1).reduce((n, l) => n + l.length + 1, 0);
    area.scrollIntoView({ block: "center" });
    area.focus({ preventScroll: true });
    area.setSelectionRange(start, start + (lines[line - 1]?.length ?? 0));
    // Bring the line into view: lines are a fixed height.
    const lineHeight = parseFloat(getComputedStyle(area).lineHeight) || 20;
    area.scrollTop = Math.max(0, (line - 3) * lineHeight);
  }

  return (
    <div className="yaml-editor">
      <label htmlFor={id}>{label}</label>
      <div className="editor">
        <div className="editor-gutter" aria-hidden="true" style={{ transform: `translateY(${-scroll.top}px)` }}>
          {lines.map((_, i) => (
            <div key={i} className={byLine.has(i + 1) ? "gutter-line has-error" : "gutter-line"}>
              {i + 1}
            </div>
          ))}
        </div>
        <div className="editor-body">
          <div className="editor-backdrop" aria-hidden="true" style={{ transform: `translate(${-scroll.left}px, ${-scroll.top}px)` }}>
            {lines.map((line, i) => {
              const messages = byLine.get(i + 1);
              return (
                <div key={i} className={messages ? "backdrop-line has-error" : "backdrop-line"}>
                  <span className="backdrop-text">{line || " "}</span>
                  {messages && <span className="inline-error">⟵ {messages.join(" · ")}</span>}
                </div>
              );
            })}
          </div>
          <textarea
            id={id}
            ref={textarea}
            className="editor-input"
            value={value}
            onChange={(e) => onChange(e.target.value)}
            onScroll={(e) => setScroll({ top: e.currentTarget.scrollTop, left: e.currentTarget.scrollLeft })}
            wrap="off"
            spellCheck={false}
            autoCapitalize="off"
            autoComplete="off"
            rows={Math.min(30, Math.max(12, lines.length + 1))}
            aria-invalid={placed.length > 0}
            aria-describedby={placed.length > 0 && errorsId ? errorsId : undefined}
          />
        </div>
      </div>
    </div>
  );
}
