import { useId, useMemo, useRef, useState } from "react";
import type { ValidationIssue } from "../api/types";
import { placeIssues } from "../yaml/issues";

interface YamlEditorProps {
  label: string;
  value: string;
  onChange: (value: string) => void;
  issues: readonly ValidationIssue[];
}

/**
 * A plain textarea (so the keyboard, undo and paste work as everywhere) over a backdrop that
 * repeats its lines invisibly and writes each error after the end of its line: the message
 * shows at the field. The same errors are listed under the editor for screen readers, each
 * with a button that puts the cursor on its line.
 */
export function YamlEditor({ label, value, onChange, issues }: YamlEditorProps) {
  const id = useId();
  const errorsId = `${id}-errors`;
  const textarea = useRef<HTMLTextAreaElement>(null);
  const [scroll, setScroll] = useState({ top: 0, left: 0 });
  const lines = useMemo(() => value.split("\n"), [value]);
  const placed = useMemo(() => placeIssues(value, issues), [value, issues]);
  const byLine = useMemo(() => {
    const map = new Map<number, string[]>();
    for (const p of placed) if (p.line !== null) map.set(p.line, [...(map.get(p.line) ?? []), p.message]);
    return map;
  }, [placed]);

  function jumpTo(line: number) {
    const area = textarea.current;
    if (!area) return;
    const start = lines.slice(0, line - 1).reduce((n, l) => n + l.length + 1, 0);
    area.focus();
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
            aria-describedby={placed.length > 0 ? errorsId : undefined}
          />
        </div>
      </div>
      {placed.length > 0 && (
        <div id={errorsId} className="alert editor-errors" role="alert">
          <p>
            The manager found {placed.length} error{placed.length === 1 ? "" : "s"} in the config:
          </p>
          <ul>
            {placed.map((p, i) => (
              <li key={i}>
                {p.line !== null ? (
                  <button type="button" className="link-button" onClick={() => jumpTo(p.line as number)}>
                    line {p.line}
                  </button>
                ) : (
                  <span>(not in the text)</span>
                )}{" "}
                <code>{p.path}</code>: {p.message}
              </li>
            ))}
          </ul>
        </div>
      )}
    </div>
  );
}
